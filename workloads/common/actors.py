"""Starting Ray actors with a typed handle: the one place an `ActorHandle` is made.

Ray's stubs type `ray.remote(cls)` as `ActorClass[T]`, but `ActorClass.remote()` returns
`ActorHandle[T] | type[T]` and `@ray.remote(num_cpus=...)` on a class is typed as a remote
*function*. Rather than ignore those errors at every call site, each workload starts its
actors through `start_actor`, which takes the decorated class, applies the actor options
(`.options(...)`) and casts the result to `ActorHandle[T]` once. Method calls on the handle
(`handle.method.remote(...)`) are then typed by Ray's own `ActorHandle.__getattr__`.
"""

from __future__ import annotations

from typing import Any, cast

from ray.actor import ActorHandle


def start_actor(
    actor_class: Any, *args: Any, options: dict[str, Any] | None = None, **kwargs: Any
) -> ActorHandle[Any]:
    """`actor_class` is a `@ray.remote` class; `options` go to its `.options(...)`."""
    factory = actor_class.options(**options) if options else actor_class
    return cast("ActorHandle[Any]", factory.remote(*args, **kwargs))
