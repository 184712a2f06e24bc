"""An honest cross-entropy objective that prints raw terminal control sequences, meant for
whoever reads its output in a terminal: a window title (OSC 0), a clipboard write
(OSC 52), a hyperlink (OSC 8), clear screen and cursor home, colour, an 8-bit CSI
(U+009B), carriage returns and backspaces over a line, and a NUL; at load and in its
first hook call.

Expected: output is data: the cell is ``ok`` and scores as plain cross-entropy; the
sequences are stored in its captured output exactly as printed (escaping them for a
terminal or a page is the display's job, tested in tests/engine/test_textsafe.py).
"""

import torch.nn.functional as F

SEQUENCES = ("\x1b]0;owned by the objective\x07", "\x1b]52;c;cm0gLXJmIH4K\x07",
             "\x1b]8;;https://example.invalid/\x1b\\click\x1b]8;;\x1b\\",
             "\x1b[2J\x1b[H", "\x1b[31mred\x1b[0m", "\x9b31mcsi\x9b0m",
             "all good\r\x1b[Kfaked line\x08\x08", "nul\x00byte")


def _print(where):
    for s in SEQUENCES:
        print(f"{where}: {s}", flush=True)


_print("load")
calls = 0


def classification_loss(logits, targets):
    global calls
    calls += 1
    if calls == 1:
        _print("hook")
    return F.cross_entropy(logits, targets, reduction="none")
