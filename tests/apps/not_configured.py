"""An app that defines a worker but never calls lowkiq.configure."""

import lowkiq


class Lonely(lowkiq.Worker):
    def perform(self, payloads_by_id):
        pass
