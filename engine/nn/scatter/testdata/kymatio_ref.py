# Generates kymatio_ref.json, the reference outputs TestKymatioReference checks the Go
# transform against: Kymatio's Scattering2D (numpy frontend, Kymatio 0.4.0.dev from
# github.com/kymatio/kymatio, put on PYTHONPATH; numpy 1.24, scipy 1.10) on
#   - MNIST test images 0 and 1 (t10k-images-idx3-ubyte.gz, pixels / 255; the test reads the
#     pixels from the data directory and skips these cases when it is absent), J = 2, L = 8;
#   - a synthetic 28×28 image, J = 2, L = 8;
#   - a random 12×16 image (numpy seed 7), J = 1, L = 4;
#   - a random 32×32 image (numpy seed 8), J = 3, L = 6.
# Run: PYTHONPATH=/path/to/kymatio python3 kymatio_ref.py /path/to/mnist > kymatio_ref.json
import gzip, json, sys
import numpy as np
from kymatio.numpy import Scattering2D

def mnist(i):
    with gzip.open(sys.argv[1] + "/t10k-images-idx3-ubyte.gz") as f:
        b = f.read()
    return np.frombuffer(b[16 + 784 * i:16 + 784 * (i + 1)], np.uint8).reshape(28, 28) / 255.0

ii, jj = np.mgrid[0:28, 0:28]
synthetic = 0.5 + 0.5 * np.sin(0.7 * ii) * np.cos(0.3 * jj) + ((ii * jj) % 7) / 7.0
cases = [("mnist-test-0", mnist(0), 2, 8, False), ("mnist-test-1", mnist(1), 2, 8, False),
         ("synthetic", synthetic, 2, 8, True),
         ("random-12x16", np.random.RandomState(7).rand(12, 16), 1, 4, True),
         ("random-32x32", np.random.RandomState(8).rand(32, 32), 3, 6, True)]
out = []
for name, x, J, L, keep in cases:
    s = Scattering2D(J=J, shape=x.shape, L=L)(x)
    c = {"name": name, "H": x.shape[0], "W": x.shape[1], "J": J, "L": L,
         "shape": list(s.shape), "out": [float("%.9g" % v) for v in s.ravel()]}
    if keep:
        c["image"] = [float("%.17g" % v) for v in x.ravel()]
    out.append(c)
json.dump(out, sys.stdout)
