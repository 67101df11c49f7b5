"""Response-provenance service.

Importing the package pins offline defaults before any provider library is loaded: litellm
uses its bundled price map and tokenizer files and never fetches catalogues, tokenizers or
model files from the network. Values already set in the environment win.
"""

import os

for _name, _value in (
    ("LITELLM_LOCAL_MODEL_COST_MAP", "True"),
    ("LITELLM_OFFLINE_MODE", "true"),
    ("LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS", "True"),
    ("TOKENIZERS_PARALLELISM", "false"),
    ("HF_HUB_OFFLINE", "1"),
):
    os.environ.setdefault(_name, _value)
