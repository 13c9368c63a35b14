// Probe (H100): scatter-add of an embedding gradient, dE[tok[b], d] += dy[b, d], 16384 x 1024
// into a 32768-row f32 table: one scalar atomic per element against vector atomics (sm_90).
//   nvcc -O3 -arch=sm_90 tools/probe/scatter.cu -o /tmp/scatter && /tmp/scatter
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_runtime.h>
constexpr int V = 32768, D = 1024, B = 16384;
__global__ void scalar(float* dE, const long long* tok, const float* dy) {
  int i = blockIdx.x * 256 + threadIdx.x;
  atomicAdd(&dE[tok[i / D] * D + i % D], dy[i]);
}
__global__ void vec2(float* dE, const long long* tok, const float* dy) {
  int i = (blockIdx.x * 256 + threadIdx.x) * 2;
  atomicAdd(reinterpret_cast<float2*>(&dE[tok[i / D] * D + i % D]), *reinterpret_cast<const float2*>(&dy[i]));
}
__global__ void vec4(float* dE, const long long* tok, const float* dy) {
  int i = (blockIdx.x * 256 + threadIdx.x) * 4;
  atomicAdd(reinterpret_cast<float4*>(&dE[tok[i / D] * D + i % D]), *reinterpret_cast<const float4*>(&dy[i]));
}
// a row per warp-group loop: fewer index loads
__global__ void vec4rows(float* dE, const long long* tok, const float* dy) {
  int row = blockIdx.x, t = threadIdx.x; // 256 threads x 4 = 1024
  long long r = tok[row];
  atomicAdd(reinterpret_cast<float4*>(&dE[r * D + t * 4]), *reinterpret_cast<const float4*>(&dy[(long long)row * D + t * 4]));
}
int main() {
  std::vector<long long> h(B);
  srand(3);
  for (auto& t : h) t = ((long long)rand() * 7919) % V;
  float *dE, *dy; long long* tok;
  cudaMalloc(&dE, sizeof(float) * V * D); cudaMalloc(&dy, sizeof(float) * B * D); cudaMalloc(&tok, 8 * B);
  cudaMemcpy(tok, h.data(), 8 * B, cudaMemcpyHostToDevice);
  cudaMemset(dE, 0, sizeof(float) * V * D); cudaMemset(dy, 0, sizeof(float) * B * D);
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  auto time = [&](const char* n, auto launch) {
    for (int w = 0; w < 3; ++w) launch();
    cudaEventRecord(a);
    for (int r = 0; r < 50; ++r) launch();
    cudaEventRecord(b); cudaEventSynchronize(b);
    float ms; cudaEventElapsedTime(&ms, a, b);
    printf("%-10s %.4f ms  %s\n", n, ms / 50, cudaGetErrorString(cudaGetLastError()));
  };
  time("scalar", [&] { scalar<<<B * D / 256, 256>>>(dE, tok, dy); });
  time("vec2", [&] { vec2<<<B * D / 512, 256>>>(dE, tok, dy); });
  time("vec4", [&] { vec4<<<B * D / 1024, 256>>>(dE, tok, dy); });
  time("vec4rows", [&] { vec4rows<<<B, 256>>>(dE, tok, dy); });
}
