from flask import Blueprint, request

from .workers import OrdersWorker

bp = Blueprint("orders", __name__)


@bp.post("/orders/<order_id>/sync")
def sync_order(order_id):
    try:
        count = OrdersWorker.perform_async([{"id": order_id, "payload": request.get_json(silent=True) or {}}])
    except (TypeError, ValueError) as exc:  # lowkiq names what is wrong with the job
        return {"error": str(exc)}, 400
    return {"enqueued": count}, 202
