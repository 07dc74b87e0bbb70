"""The book's figures, one module per chapter (:mod:`rope_lib.figures.experiments`: chapter 9).

A figure module calls the math and report modules of :mod:`rope_lib` and draws; nothing in
those modules imports a figure module (so reading results never needs matplotlib).
"""
