"""An API that enqueues: uvicorn orders_api.main:app

The lowkiq server runs beside it: lowkiq -r lowkiq_app.py
"""

from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, HTTPException
from pydantic import BaseModel

import lowkiq

from .workers import OrdersWorker


@asynccontextmanager
async def lifespan(app: FastAPI):
    lowkiq.configure(workers=[OrdersWorker])  # Redis: LOWKIQ_REDIS_URL, else REDIS_URL
    yield


app = FastAPI(lifespan=lifespan)


class OrderVersion(BaseModel):
    version: int  # the job's score: versions of one order are performed oldest first
    data: dict[str, Any]


# `async def`, awaiting aperform_async: the enqueue waits for Redis without blocking the event loop, so the
# worker's other requests go on meanwhile.
@app.post("/orders/{order_id}/versions", status_code=202)
async def enqueue_version(order_id: str, version: OrderVersion) -> dict[str, int]:
    try:
        count = await OrdersWorker.aperform_async([{"id": order_id, "score": version.version,
                                                    "payload": version.data}])
    except (TypeError, ValueError) as exc:  # lowkiq names what is wrong with the job: the client's to fix
        raise HTTPException(status_code=400, detail=str(exc)) from exc
    return {"enqueued": count}
