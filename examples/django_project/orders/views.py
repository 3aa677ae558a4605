from django.contrib.auth.decorators import login_required
from django.http import JsonResponse
from django.views.decorators.http import require_POST

from .workers import OrdersWorker


@require_POST
@login_required
def sync_order(request, order_id):
    try:
        count = OrdersWorker.perform_async([{"id": order_id, "payload": {"by": request.user.get_username()}}])
    except (TypeError, ValueError) as exc:  # lowkiq names what is wrong with the job
        return JsonResponse({"error": str(exc)}, status=400)
    return JsonResponse({"enqueued": count}, status=202)
