"""An app that configures lowkiq but forgets its workers."""

import lowkiq

lowkiq.configure(workers=[])
