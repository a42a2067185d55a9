"""Router plug-ins: `base_router` is the contract; one `<variant>_router.py` per policy.

`make_router(policy, **params)` imports the policy's module lazily and calls its module-level
`make(policy: RouterPolicy, **params) -> Router`. A new policy adds a `RouterPolicy` member in
`base_router` and its module name to `_MODULES`.
"""

from __future__ import annotations

import importlib

from planning.routing.base_router import Router, RouterPolicy

_MODULES: dict[RouterPolicy, str] = {
    RouterPolicy.STATIC: "planning.routing.static_router",
    RouterPolicy.FLUIDTOKEN: "planning.routing.fluidpd_router",
    RouterPolicy.FLUIDROLE: "planning.routing.fluidpd_router",
    RouterPolicy.FLUIDPD: "planning.routing.fluidpd_router",
}


def make_router(policy: RouterPolicy | str, **params: object) -> Router:
    """A fresh router of `policy` for one run (a simulation or a live router's lifetime)."""
    chosen = RouterPolicy(policy)
    module = importlib.import_module(_MODULES[chosen])
    router: Router = module.make(chosen, **params)
    return router


__all__ = ["Router", "RouterPolicy", "make_router"]
