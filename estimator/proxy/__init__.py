"""Proxy-first tracing (beyond the paper): a local model ranks the sources (``driver``, ``prefix``),
the hosted judge confirms the ranking (``confirm``), the result (``result``) and its price (``cost``)."""
