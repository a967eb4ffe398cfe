"""British medical spellings rewritten to American ones, for comparing diagnosis text."""

from __future__ import annotations

import re

# British spellings rewritten to American ones, applied to lower-cased text. A short
# explicit list: a general spelling library would be a large dependency for a dozen
# medical word roots. Shared by the retrieval baseline, the diagnosis matcher and
# the vocabulary's category lookup.
_BRITISH_TO_AMERICAN = (
    (re.compile(r"tumour"), "tumor"),
    (re.compile(r"haem"), "hem"),  # haemorrhage, haematoma, ischaemic
    (re.compile(r"aemi"), "emi"),  # leukaemia, anaemia, hypoglycaemic
    (re.compile(r"aema\b"), "ema"),  # empyaema
    (re.compile(r"oedem"), "edem"),
    (re.compile(r"oesophag"), "esophag"),
    (re.compile(r"paed"), "ped"),
    (re.compile(r"\bfoet"), "fet"),
    (re.compile(r"leuco"), "leuko"),
    (re.compile(r"anaesth"), "anesth"),
    (re.compile(r"coeli"), "celi"),
    (re.compile(r"aetiolog"), "etiolog"),
    (re.compile(r"behaviour"), "behavior"),
    (re.compile(r"\bcolour"), "color"),
    (re.compile(r"sulph"), "sulf"),
    (re.compile(r"\bgrey\b"), "gray"),
    (re.compile(r"\bcentre"), "center"),
    (re.compile(r"\bfibre"), "fiber"),
    (re.compile(r"\bageing\b"), "aging"),
    (re.compile(r"\bneurone"), "neuron"),
    (re.compile(r"coele\b"), "cele"),  # encephalocoele, myelomeningocoele
    (re.compile(r"naev"), "nev"),  # naevus, naevoid
    (re.compile(r"amoeb"), "ameb"),  # amoebic
    (re.compile(r"\boestr"), "estr"),
    (re.compile(r"(?<=[pn])oea\b"), "ea"),  # apnoea, dyspnoea
    (re.compile(r"rrhoea"), "rrhea"),  # rhinorrhoea, otorrhoea
    (re.compile(r"aesth"), "esth"),  # paraesthesia
    (re.compile(r"gynaec"), "gynec"),
)


def american_spelling(text: str) -> str:
    """Lower-case ``text`` and rewrite common British medical spellings to American."""
    text = text.lower()
    for pattern, replacement in _BRITISH_TO_AMERICAN:
        text = pattern.sub(replacement, text)
    return text
