// alloc_demo: the memory pattern of a training loop, in plain CUDA runtime calls.
//
//   - parameters: allocated once with cudaMalloc, live for the whole run
//   - a pinned staging buffer (cudaHostAlloc) that batches are copied from
//   - per step: activations allocated layer by layer as the forward pass goes (stream-ordered,
//     cudaMallocAsync), growing with the batch's sequence length, and released in reverse order
//     by the backward pass (cudaFreeAsync); a gradient buffer (cudaMalloc/cudaFree)
//   - a small "metrics" buffer per step that the program forgets to free: the leak
//     `memguard top --at exit` points at
//
// Run it under memguard with tools/run-example.sh. It links libcudart normally, so it runs on a
// real GPU as well as on the fake runtime of the tests.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

constexpr int k_layers = 4;
constexpr int k_steps = 5;
constexpr size_t k_hidden = 1024;
constexpr size_t k_batch = 8;
constexpr size_t k_parameter_bytes = k_hidden * k_hidden * sizeof(float);  // 4 MiB per layer
constexpr size_t k_staging_bytes = 8u << 20;
constexpr size_t k_metrics_bytes = 64u << 10;

void check(cudaError_t error, const char* what) {
    if (error == cudaSuccess) return;
    std::fprintf(stderr, "alloc_demo: %s failed: %s (%s)\n", what, cudaGetErrorName(error), cudaGetErrorString(error));
    std::exit(1);
}

struct Model {
    std::vector<void*> parameters;
};

__attribute__((noinline)) Model load_parameters() {
    Model model;
    for (int layer = 0; layer < k_layers; ++layer) {
        void* weights = nullptr;
        check(cudaMalloc(&weights, k_parameter_bytes), "cudaMalloc(parameters)");
        check(cudaMemset(weights, 0, k_parameter_bytes), "cudaMemset(parameters)");
        model.parameters.push_back(weights);
    }
    return model;
}

__attribute__((noinline)) void* create_staging_buffer() {
    void* staging = nullptr;
    check(cudaHostAlloc(&staging, k_staging_bytes, cudaHostAllocDefault), "cudaHostAlloc(staging)");
    return staging;
}

// Activations of one layer for a batch of `sequence_length` tokens.
__attribute__((noinline)) void* forward_layer(size_t sequence_length, cudaStream_t stream) {
    void* activations = nullptr;
    size_t bytes = k_batch * sequence_length * k_hidden * sizeof(float);
    check(cudaMallocAsync(&activations, bytes, stream), "cudaMallocAsync(activations)");
    return activations;
}

__attribute__((noinline)) void record_metrics() {
    void* metrics = nullptr;
    check(cudaMalloc(&metrics, k_metrics_bytes), "cudaMalloc(metrics)");
    // ... and the pointer is dropped: never freed.
}

__attribute__((noinline)) void train_step(int step, void* staging, cudaStream_t stream) {
    size_t sequence_length = 128 * static_cast<size_t>(step + 1);  // warm-up: batches grow

    // The batch goes from the pinned staging buffer to the device.
    void* batch = nullptr;
    size_t batch_bytes = k_batch * sequence_length * sizeof(int);
    check(cudaMalloc(&batch, batch_bytes), "cudaMalloc(batch)");
    check(cudaMemcpy(batch, staging, batch_bytes, cudaMemcpyHostToDevice), "cudaMemcpy(batch)");

    std::vector<void*> activations;
    for (int layer = 0; layer < k_layers; ++layer) {
        activations.push_back(forward_layer(sequence_length, stream));
    }

    void* gradients = nullptr;
    check(cudaMalloc(&gradients, k_parameter_bytes), "cudaMalloc(gradients)");
    for (auto it = activations.rbegin(); it != activations.rend(); ++it) {
        check(cudaFreeAsync(*it, stream), "cudaFreeAsync(activations)");
    }
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    check(cudaFree(gradients), "cudaFree(gradients)");
    check(cudaFree(batch), "cudaFree(batch)");
    record_metrics();
    std::printf("step %d: sequence length %zu, %d layers of activations\n", step, sequence_length, k_layers);
}

}  // namespace

int main() {
    int devices = 0;
    check(cudaGetDeviceCount(&devices), "cudaGetDeviceCount");
    check(cudaSetDevice(0), "cudaSetDevice");
    std::printf("alloc_demo: %d CUDA device(s)\n", devices);

    cudaStream_t stream = nullptr;
    check(cudaStreamCreate(&stream), "cudaStreamCreate");
    Model model = load_parameters();
    void* staging = create_staging_buffer();

    for (int step = 0; step < k_steps; ++step) train_step(step, staging, stream);

    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    check(cudaFreeHost(staging), "cudaFreeHost(staging)");
    for (void* weights : model.parameters) check(cudaFree(weights), "cudaFree(parameters)");
    check(cudaStreamDestroy(stream), "cudaStreamDestroy");
    std::printf("alloc_demo: done (%d steps, the metrics buffers are left live)\n", k_steps);
    return 0;
}
