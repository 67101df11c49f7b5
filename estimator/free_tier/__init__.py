"""§7.2–7.3, Algorithms 2 and 3 — the free tier, no model calls: segmentation of the answer into claims
(``segment``, ``selection``), anchors (``anchors``, ``anchor_groups``), gating (``gating``), the best
verbatim quote (``verbatim``, ``numbers``) and the rule cue: a sentence that restates a rule of the instructions
(``restates``)."""
