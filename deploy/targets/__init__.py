"""Deploy targets: where rendered units run (kubernetes, ec2, local, dry-run), one protocol."""
