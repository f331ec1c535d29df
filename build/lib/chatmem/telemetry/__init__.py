"""What chatmem tells its operators: log lines (:mod:`.logs`) and Prometheus metrics
(:mod:`.metrics`).  Depends on nothing else of chatmem, so every room may report through it."""
