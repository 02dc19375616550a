// Optimizer updates over the flat parameter block: one sweep per step.
// Self-contained for NVRTC.

// SGD with momentum and (coupled) weight decay:
//   g = grad + weight_decay * w;  v = momentum * v + g;
//   w -= lr * v, or with nesterov != 0: w -= lr * (g + momentum * v)
// scalars, when not null, holds {lr} in device memory and overrides `lr`: it
// is read when the kernel runs, so a replayed graph follows the schedule.
extern "C" __global__ void stoke_sgd_update(float* w, const float* grad, float* velocity,
                                            const float* scalars, float lr, float momentum,
                                            float weight_decay, int nesterov, long long n) {
  if (scalars) lr = scalars[0];
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    const float g = grad[i] + weight_decay * w[i];
    const float v = momentum * velocity[i] + g;
    velocity[i] = v;
    w[i] -= lr * (nesterov ? g + momentum * v : v);
  }
}

// Adam / AdamW. bias1 = 1 - beta1^t, bias2 = 1 - beta2^t are computed on the
// host per step. decoupled != 0 applies weight decay AdamW-style. scalars,
// when not null, holds {lr, bias1, bias2} in device memory and overrides them.
extern "C" __global__ void stoke_adam_update(float* w, const float* grad, float* m, float* v,
                                             const float* scalars, float lr, float beta1,
                                             float beta2, float eps, float weight_decay,
                                             int decoupled, float bias1, float bias2, long long n) {
  if (scalars) {
    lr = scalars[0];
    bias1 = scalars[1];
    bias2 = scalars[2];
  }
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    float g = grad[i];
    if (!decoupled) g += weight_decay * w[i];
    const float mi = beta1 * m[i] + (1.0f - beta1) * g;
    const float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    const float step = (mi / bias1) / (sqrtf(vi / bias2) + eps);
    w[i] -= lr * (step + (decoupled ? weight_decay * w[i] : 0.0f));
  }
}
