"""Whose code each stack is (``analyzers.stacks.label_stacks``): the stage a sample counts
for without spans. Frames declared here, as the sampler writes them."""

from __future__ import annotations

import pandas as pd

from probe.analyzers.stacks import label_stacks

TORCH = "/usr/lib/python3/site-packages/torch/nn/modules/module.py"
FRAMES = [  # (function, file): the service's own files are relative, torch's installed
    ("main", "service.py"),
    ("infer", "service.py"),
    ("Module.__call__", TORCH),  # placeholder: not on the stacks below
    ("Module._wrapped_call_impl", TORCH),  # as the sampler writes them: qualified
    ("Module._call_impl", TORCH),
    ("Encoder.forward", "model.py"),
    ("Block.forward", "model.py"),
    ("Attention.forward", "model.py"),
    ("handle", "/usr/lib/python3/site-packages/server/app.py"),
]


def user_functions(*stacks: list[int]) -> list[str]:
    frames = pd.DataFrame(
        {"frame_id": range(len(FRAMES)), "function": [f for f, _ in FRAMES],
         "filename": [p for _, p in FRAMES], "first_line": 1}
    )  # fmt: skip
    table = pd.DataFrame(
        {"stack_id": range(len(stacks)), "frame_ids": [";".join(map(str, s)) for s in stacks],
         "leaf_line": 1, "leaf_call": "torch.matmul"}
    )  # fmt: skip
    return list(label_stacks(table, frames)["user_function"])


def test_a_model_s_modules_count_for_the_service_function_that_runs_it():
    # main -> infer -> model(x) -> Encoder.forward -> block(x) -> Block.forward -> ...
    deep = [0, 1, 3, 4, 5, 3, 4, 6, 3, 4, 7]
    assert user_functions(deep, [0, 1, 3, 4, 5]) == ["infer (service.py)"] * 2


def test_a_model_called_from_library_code_alone_counts_for_its_top_module():
    # a server's handler calls the model: no frame of the service's above the module call
    assert user_functions([8, 3, 4, 5, 3, 4, 6]) == ["Encoder.forward (model.py)"]


def test_outside_a_model_the_deepest_frame_of_the_service_s_code_stands():
    assert user_functions([0, 1], [0, 8]) == ["infer (service.py)", "main (service.py)"]
