"""Cloud inventory: which GPU machines can be rented where, how many, at what price.

Sources (`base_source.SourceName`): aws (boto3), file (YAML/CSV a user writes), catalog (bundled
reference prices with user-set counts). `snapshots.take_snapshot` reads one and stores it.
"""
