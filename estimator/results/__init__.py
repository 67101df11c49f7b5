"""What a trace returns, each shape defined once (frozen pydantic models, ``models``): a traced claim, its
layers, sources and span checks, the call account, the probe's and the audits' results; the NaN-as-null
score type (``score``); the proxy-first report (``proxy``); and what a trace reports while it runs and how its
verdict is decided (``trace``)."""
