"""§7.1, Algorithm 1 — BuildLayeredCorpus: the stored turn (``turn``), the layered corpus's vocabulary
(``units``: layers, evidence records, source units) and its construction (``build``)."""
