"""§7.4, Algorithm 4 — hierarchical attribution by leave-one-out. ``driver`` runs the rounds
(``rounds``: round 1 over layers, round 2 over sources, the memo), ``redundancy`` resolves zeros,
``assembly`` builds the result (verdict, roles, ``diagnosis`` §9, ``caveats``, ``labels``, and
``coherence``: measurements of a noisy judge that contradict each other, reported and the verdict hedged). The scalars
the driver measures with: ``measure`` (the protocol), ``judged`` (the judged digit, §6.2),
``expected_digit``, ``logprob`` and its cost (``logprob_cost``), and for a tool call the tokens τ_Γ counts
(``call_tokens``)."""
