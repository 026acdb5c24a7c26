"""Model control for a served repository: Triton's / KServe's repository extension at run time.

``POST /v2/repository/index`` lists every model folder with its state; ``POST
/v2/repository/models/{name}/load`` loads (or reloads) a model, ``.../unload`` unloads it. Modes follow
Triton's ``--model-control-mode``: ``none`` (every model loaded at start; load/unload refused) and
``explicit`` (only ``--load-model NAME`` at start; the API loads and unloads).

Rules: loads run one at a time per model and at most ``max_concurrent_loads`` at once (a semaphore; two
concurrent loads of one model load it once, the second waits for the first's outcome); a load that fails
(corrupt file, bad config) leaves the versions already serving untouched; a reload swaps the new versions
in, then drains and closes the old ones. Each load's memory is the process RSS after minus before
(``rss_bytes`` in the index; with several loads at once they share the attribution).
``max_loaded_models`` (when asked) unloads the least recently used model before a load that would pass
it. Unloading marks the model unavailable at once (new requests get
503 with Retry-After), lets every accepted request finish (the batcher drains), frees the instances, and
returns only when the model is gone; after that its routes answer 404.

Sources: Triton's docs/protocol/extension_model_repository.md and docs/user_guide/model_management.md.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from ..errors import UsageError
from .errors import ControlError
from .load_override import Override, Staged, config_text
from .log_settings import LOGGER
from .repository import check_name, load_served, read_model
from .warmup import warm_model

MODES = ("none", "explicit")


def rss() -> int:
    """This process's resident set size (bytes, psutil)."""
    import psutil

    return int(psutil.Process().memory_info().rss)


class ServedModels(Protocol):
    """What model control changes in the app it is bound to (a :class:`~inferperf.serve.app.ServeApp`)."""

    versions: dict[str, dict[str, Any]]  # name -> version -> served model
    draining: set[str]  # names being unloaded: the app answers 503
    last_used: dict[str, int]  # name -> clock ns of its last infer

    def replace_model(self, name: str, served: Sequence[Any]) -> list[Any]:
        """Serve ``served`` as every version of ``name`` (empty: stop serving it); the versions replaced."""
        ...


class ModelControl:
    """Load and unload the models of the repository at ``root`` in the running app it is bound to.

    Built before the app and handed to it (``ServeApp(..., repository=control)``), which calls :meth:`bind`.
    ``states`` maps a model name to ``READY``, ``LOADING``, ``UNLOADING`` or ``UNAVAILABLE``, with the
    last failure's message in ``reasons``.

    Raises:
        UsageError: an unknown ``mode``, ``max_concurrent_loads`` < 1 or ``max_loaded_models`` < 0.
    """

    app: ServedModels

    def __init__(self, root: Path, mode: str = "none", max_concurrent_loads: int = 1,
                 observer: Any = None, clock: Any = None, max_loaded_models: int = 0) -> None:  # fmt: skip
        if mode not in MODES:
            raise UsageError(f"--model-control-mode {mode!r}: use none or explicit")
        if max_concurrent_loads < 1:
            raise UsageError(f"--max-concurrent-loads {max_concurrent_loads}: use 1 or more")
        self.root, self.mode = Path(root), mode
        self.observer, self.clock = observer, clock
        self._limit = asyncio.Semaphore(max_concurrent_loads)
        self._inflight: dict[str, asyncio.Future[None]] = {}
        if max_loaded_models < 0:
            raise UsageError(f"--max-loaded-models {max_loaded_models}: use 0 (no limit) or more")
        self.max_loaded_models = max_loaded_models
        self.states: dict[str, str] = {}
        self.reasons: dict[str, str] = {}
        self.rss_bytes: dict[str, int] = {}  # resident memory each load added (process RSS after - before)
        self._staged: dict[str, Staged] = {}  # the folders that file overrides made, while their model serves

    def bind(self, app: ServedModels) -> None:
        """Control ``app``'s models from now on; every model it serves already is ``READY``."""
        self.app = app
        self.states.update({n: "READY" for n in app.versions})

    def _refuse_in_none_mode(self, what: str) -> None:
        if self.mode == "none":
            raise ControlError(f"{what} is refused in --model-control-mode none: start the server with"
                               " --model-control-mode explicit")

    def index(self, ready_only: bool = False) -> list[dict[str, Any]]:
        """Triton's index entries: every model folder of the repository, with its versions when loaded."""
        names = sorted({d.name for d in self.root.iterdir() if d.is_dir() and not d.name.startswith(".")}
                       | set(self.states))
        out = []
        for name in names:
            state = self.states.get(name, "UNAVAILABLE")
            if ready_only and state != "READY":
                continue
            versions = sorted(self.app.versions.get(name, {})) or [""]
            for v in versions:
                entry = {"name": name, "version": v, "state": state, "reason": self.reasons.get(name, "")}
                if state == "READY" and name in self.rss_bytes:
                    entry["rss_bytes"] = self.rss_bytes[name]
                out.append(entry)
        return out

    async def load(self, name: str, override: Override | None = None) -> None:
        """Load (or reload) ``name``, with Triton's load-time ``override`` (a config, files:
        :mod:`inferperf.serve.load_override`) when given; concurrent calls for one name without an override share
        one load.

        Raises:
            ControlError: 400 for a refused mode, a bad name, a malformed override or a model that fails to load
                (the versions already serving stay); 500 when an override's files cannot be written.
        """
        self._refuse_in_none_mode("loading a model")
        try:
            check_name(name)
        except UsageError as e:
            raise ControlError(str(e)) from None
        pending = self._inflight.get(name)
        if pending is not None and not override:
            await asyncio.shield(pending)
            return
        while pending is not None:  # an override waits for the load under way, then loads what it asks
            await asyncio.gather(asyncio.shield(pending), return_exceptions=True)
            pending = self._inflight.get(name)
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._inflight[name] = fut
        try:
            await self._load(name, override or Override())
            fut.set_result(None)
        except BaseException as e:
            fut.set_exception(e)
            fut.exception()  # retrieved: a lone caller must not log "exception never retrieved"
            raise
        finally:
            del self._inflight[name]

    async def _load(self, name: str, override: Override) -> None:
        async with self._limit:
            before = self.states.get(name)
            self.states[name] = "LOADING"
            staged = None
            try:
                if override.files:
                    staged = Staged(name, override)  # the folder the files make, with their config
                    entry = read_model(staged.root, name)
                else:
                    text = config_text(name, override.config) if override.config is not None else None
                    entry = read_model(self.root, name, text)
                await self._make_room(name)
                rss_before = rss()
                served = await asyncio.to_thread(load_served, entry, self.observer, self.clock)
                self.rss_bytes[name] = max(0, rss() - rss_before)
                for m in served:
                    await warm_model(m)  # its batcher and instances, in this loop, before it is swapped in
            except Exception as e:  # noqa: BLE001 - any failed load leaves the serving versions; the state is restored
                self.states[name] = before or "UNAVAILABLE"
                if staged is not None:
                    staged.cleanup()
                if isinstance(e, ControlError):  # an override's refusal, already in Triton's words
                    self.reasons[name] = str(e)
                    raise
                self.reasons[name] = str(e)
                raise ControlError(f"failed to load '{name}': {e}") from None
            old = self.app.replace_model(name, served)
            self.states[name], self.reasons[name] = "READY", ""
            LOGGER.info("loaded model '%s' version(s) %s", name, ", ".join(m.version for m in served))
            self._set_staged(name, staged)
        for m in old:
            await m.close(drain=True)

    def _set_staged(self, name: str, staged: Staged | None) -> None:
        """Keep the staging folder of ``name``'s served files (None: none), removing the one it replaces."""
        previous = self._staged.pop(name, None)
        if previous is not None:
            previous.cleanup()
        if staged is not None:
            self._staged[name] = staged

    async def _make_room(self, name: str) -> None:
        """With ``max_loaded_models``: unload least recently used models until loading ``name`` fits."""
        if not self.max_loaded_models or name in self.app.versions:
            return
        while len(self.app.versions) >= self.max_loaded_models:
            others = [n for n in self.app.versions if n != name]
            if not others:
                return
            lru = min(others, key=lambda n: self.app.last_used.get(n, 0))
            await self.unload(lru)
            self.reasons[lru] = f"unloaded to make room for '{name}' (--max-loaded-models {self.max_loaded_models})"

    async def unload(self, name: str) -> None:
        """Unload ``name``: 503 for new requests at once, drain what was accepted, free it, then return.

        Raises:
            ControlError: 400 in mode none, 404 when the model is not loaded.
        """
        self._refuse_in_none_mode("unloading a model")
        if name not in self.app.versions:
            raise ControlError(f"model '{name}' is not loaded: nothing to unload", 404)
        self.states[name] = "UNLOADING"
        versions = list(self.app.versions[name].values())
        self.app.draining.add(name)
        try:
            for m in versions:
                await m.close(drain=True)
        finally:
            self.app.replace_model(name, [])
            self._set_staged(name, None)
            self.app.draining.discard(name)
            self.states[name] = "UNAVAILABLE"
            self.reasons[name] = "unloaded"
            LOGGER.info("unloaded model '%s'", name)
