"""What a user does first with an installed thdpack: import it, plan a global batch, pack it.

    python python_smoke.py EXPECTED_VERSION EXPECTED_PREFIX

Fails unless thdpack is imported from under EXPECTED_PREFIX (the venv it was installed into, not
a build tree or another installation), has the expected version, ships its type stubs, plans and
packs a batch correctly, and imports without torch.
"""

import os
import pathlib
import subprocess
import sys

import numpy as np

import thdpack

expected_version, expected_prefix = sys.argv[1], os.path.realpath(sys.argv[2])
package_dir = pathlib.Path(thdpack.__file__).resolve().parent
assert str(package_dir).startswith(expected_prefix + os.sep), (package_dir, expected_prefix)
assert thdpack.__version__ == expected_version, thdpack.__version__
assert (package_dir / "py.typed").is_file() and (package_dir / "_thdpack.pyi").is_file()

# Plan one global batch of the sft-8k mock at dp 4, then pack every micro-batch.
w = thdpack.workload("sft-8k")
dataset = thdpack.mock_dataset(w["dataset_config"])
dp, cap = 4, w["max_seqlen_per_dp_cp_rank"]
batch = thdpack.make_global_batch(dataset, 0, global_batch=thdpack.default_global_batch("sft-8k", dp),
                                  dp=dp, capacity=cap)
plan = thdpack.schedule(batch.padded_lengths, ids=batch.ids, dp=dp, max_seqlen_per_dp_cp_rank=cap)
packed_tokens = 0
for k in range(plan.num_microbatches):
    for r in range(dp):
        pack = thdpack.pack([dataset.sample(int(i)) for i in plan.pack(k, r)], capacity=cap)
        thdpack.check_pack_invariants(pack, capacity=cap)
        packed_tokens += int(pack.cu_seqlens[-1])
assert packed_tokens == int(np.sum(batch.real_lengths)), (packed_tokens, batch.real_lengths.sum())

try:
    import torch  # noqa: F401
except ImportError:
    torch_note = "torch not installed"
else:  # with torch present, the adapter must import (a module missing from the wheel fails here)
    import thdpack.torch  # noqa: F401
    torch_note = "thdpack.torch imports"

# The Parquet and Arrow readers, where the build had them: the installed module finds pyarrow's
# libraries (imported first) wherever the venv is.
try:
    import pyarrow
except ImportError:
    arrow_note = "pyarrow not installed"
else:
    if list(package_dir.glob("_thdpack_parquet*")):
        rows = thdpack.load_hf_dataset(pyarrow.table({"input_ids": [[1, 2, 3], [4]]}))
        assert rows.lengths(0, 2).tolist() == [3, 1]
        arrow_note = "Arrow tables read"
    else:
        arrow_note = "built without Parquet support"

# pyarrow is optional too: `import thdpack` must work where it cannot be imported.
blocked = "import sys; sys.modules['pyarrow'] = None; import thdpack; print(thdpack.__version__)"
out = subprocess.run([sys.executable, "-c", blocked], capture_output=True, text=True, check=True)
assert out.stdout.strip() == expected_version, out

# torch is optional: `import thdpack` must work where it cannot be imported.
blocked = "import sys; sys.modules['torch'] = None; import thdpack; print(thdpack.__version__)"
out = subprocess.run([sys.executable, "-c", blocked], capture_output=True, text=True, check=True)
assert out.stdout.strip() == expected_version, out

print(f"thdpack {thdpack.__version__} from {package_dir}: {plan.num_microbatches} micro-batches x "
      f"dp {dp}, {packed_tokens} tokens packed; {torch_note}; {arrow_note}; imports without torch")
