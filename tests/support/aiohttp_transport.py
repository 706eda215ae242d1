"""An httpx2 transport that sends through an aiohttp session, as openai's ``DefaultAioHttpClient``
(the httpx-aiohttp package) does: the openai SDK over aiohttp, with no package beyond aiohttp."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import httpx2

_HOP_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection"})
_DECODED_HEADERS = frozenset({"content-encoding", "content-length", "transfer-encoding"})


class _Body(httpx2.AsyncByteStream):
    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self.response = response

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for block in self.response.content.iter_any():
            yield block

    async def aclose(self) -> None:
        self.response.release()


class AiohttpTransport(httpx2.AsyncBaseTransport):
    """Each request one ``ClientSession.request``; the body streamed back as aiohttp reads it."""

    def __init__(self) -> None:
        self.session: aiohttp.ClientSession | None = None

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if self.session is None:
            self.session = aiohttp.ClientSession()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_HEADERS}
        response = await self.session.request(
            request.method, str(request.url), headers=headers, data=await request.aread()
        )
        kept: list[tuple[str, Any]] = [
            (k, v) for k, v in response.headers.items() if k.lower() not in _DECODED_HEADERS
        ]
        return httpx2.Response(response.status, headers=kept, stream=_Body(response))

    async def aclose(self) -> None:
        if self.session is not None:
            await self.session.close()
