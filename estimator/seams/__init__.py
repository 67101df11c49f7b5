"""The estimator's I/O seams and its one meter: the chat-model protocol (``llm``), the teacher-forced
scorer (``scorer``); every call through them is counted by the one ledger (``estimator.ledger``)."""
