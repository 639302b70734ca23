"""The panel's REST API under `<base_url>/slm-magic/api/`: jupyter_server's `APIHandler`s, each
`@tornado.web.authenticated` (the server's token or login, and its XSRF check on every change).

GET  config                      the panel's settings (how often to poll), the user
GET  status                      counts, learning phase, `stamp`
GET  changes                     `stamp` alone: what the panel polls to know when to read again
GET  memories?q=&project=&type=&tag=&author=&since=&until=&offset=&limit=
POST memories                    remember {content, tags, type, project, title, notebook, cell, cell_id, code}
GET  memories/<id>               one memory whole, with its provenance and the notebook's path
DELETE memories/<id>             forget it for good
POST memories/<id>/pin           {core: true|false}
POST memories/<id>/feedback      {signal: "up"|"down", query}
GET  facets                      the filters' values
GET  sessions                    the session timeline
"""

from __future__ import annotations

import atexit
import json
from collections.abc import Callable
from typing import Any

import tornado.web
from jupyter_server.base.handlers import APIHandler
from jupyter_server.utils import url_path_join

from ..errors import InvalidInput, SlmMagicError
from ..memory import Memory
from . import api
from .service import MemoryService, SlmMagicLab

ROUTE = "slm-magic/api"


class MemoryHandler(APIHandler):
    """The common part: whose memory, the call on the worker thread, errors as JSON."""

    def initialize(self, service: MemoryService) -> None:
        self.service = service

    @property
    def root_dir(self) -> str:
        return str(self.settings.get("server_root_dir") or self.settings.get("root_dir") or ".")

    async def answer(self, fn: Callable[[Memory], Any], status: int = 200) -> None:
        user = self.service.user_of(self.current_user)
        try:
            out = await self.service.call(user, fn)
        except InvalidInput as exc:
            self.set_status(404 if str(exc).startswith("no memory with id") else 400)
            out = {"error": str(exc)}
        except SlmMagicError as exc:
            self.set_status(503)
            out = {"error": str(exc)}
        else:
            self.set_status(status)
        self.finish(json.dumps(out, default=str))

    def body(self) -> dict[str, Any]:
        try:
            data = json.loads(self.request.body or b"{}")
        except ValueError:
            raise tornado.web.HTTPError(400, "the body must be JSON") from None
        if not isinstance(data, dict):
            raise tornado.web.HTTPError(400, "the body must be a JSON object")
        return data

    def args(self) -> dict[str, str]:
        return {k: self.get_argument(k) for k in self.request.arguments}


class ConfigHandler(MemoryHandler):
    @tornado.web.authenticated
    async def get(self) -> None:
        config = self.service.config
        self.finish(json.dumps({"user": self.service.user_of(self.current_user), "poll_ms": config.poll_ms}))


class StatusHandler(MemoryHandler):
    @tornado.web.authenticated
    async def get(self) -> None:
        await self.answer(api.overview)


class ChangesHandler(MemoryHandler):
    @tornado.web.authenticated
    async def get(self) -> None:
        await self.answer(lambda mem: {"stamp": api.stamp(mem)})


class MemoriesHandler(MemoryHandler):
    @tornado.web.authenticated
    async def get(self) -> None:
        try:
            query = api.parse_query(self.args())
        except InvalidInput as exc:
            raise tornado.web.HTTPError(400, str(exc)) from None
        await self.answer(lambda mem: api.listing(mem, query))

    @tornado.web.authenticated
    async def post(self) -> None:
        body, root = self.body(), self.root_dir
        await self.answer(lambda mem: api.remember(mem, body, root), status=201)


class MemoryItemHandler(MemoryHandler):
    @tornado.web.authenticated
    async def get(self, fact_id: str) -> None:
        root = self.root_dir
        await self.answer(lambda mem: api.detail(mem, fact_id, root))

    @tornado.web.authenticated
    async def delete(self, fact_id: str) -> None:
        await self.answer(lambda mem: api.forget(mem, fact_id))


class PinHandler(MemoryHandler):
    @tornado.web.authenticated
    async def post(self, fact_id: str) -> None:
        core = self.body().get("core", True)
        await self.answer(lambda mem: api.pin(mem, fact_id, bool(core)))


class FeedbackHandler(MemoryHandler):
    @tornado.web.authenticated
    async def post(self, fact_id: str) -> None:
        body = self.body()
        signal, query = body.get("signal"), body.get("query")
        await self.answer(lambda mem: api.feedback(mem, fact_id, signal, query if isinstance(query, str) else None))


class FacetsHandler(MemoryHandler):
    @tornado.web.authenticated
    async def get(self) -> None:
        await self.answer(api.facets)


class SessionsHandler(MemoryHandler):
    @tornado.web.authenticated
    async def get(self) -> None:
        await self.answer(api.timeline)


ID = r"([0-9A-Za-z_-]{1,64})"
ROUTES = [("config", ConfigHandler), ("status", StatusHandler), ("changes", ChangesHandler),
          ("memories", MemoriesHandler), (f"memories/{ID}", MemoryItemHandler), (f"memories/{ID}/pin", PinHandler),
          (f"memories/{ID}/feedback", FeedbackHandler), ("facets", FacetsHandler), ("sessions", SessionsHandler)]


def setup_handlers(serverapp) -> MemoryService:
    """The routes on the server's web app, sharing one MemoryService (closed with the server)."""
    service = MemoryService(SlmMagicLab(parent=serverapp))
    base = serverapp.web_app.settings["base_url"]
    serverapp.web_app.add_handlers(".*$", [(url_path_join(base, ROUTE, path) + "$", handler, {"service": service})
                                           for path, handler in ROUTES])
    serverapp.web_app.settings["slm_magic_lab"] = service
    atexit.register(service.close)
    serverapp.log.info("slm_magic.lab: the Memory panel's API at %s", url_path_join(base, ROUTE))
    return service
