// Probe: wgmma.mma_async m64n128k16 bf16 from unswizzled shared-memory layouts (sm_90a).
// Checks the descriptor offsets (measured on an H100: LBO = between core matrices along K, SBO =
// along M/N, for K-major and MN-major operands alike; the swapped reading fails), the
// accumulator fragment layout, and the throughput of 2 warpgroups on a 128x128 tile.
//   nvcc -gencode arch=compute_90a,code=sm_90a -O2 -o wgmma_probe tools/probe/wgmma_layout.cu && ./wgmma_probe
#include <cuda_bf16.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <vector>

constexpr int M = 64, N = 128, K = 64;

__device__ inline uint64_t desc(const void* p, uint32_t lbo, uint32_t sbo, int swz = 0) {
  uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(p));
  return (uint64_t)((a & 0x3FFFF) >> 4) | ((uint64_t)((lbo >> 4) & 0x3FFF) << 16) |
         ((uint64_t)((sbo >> 4) & 0x3FFF) << 32) | ((uint64_t)swz << 62);
}

template <int TA, int TB>
__device__ inline void mma(float* d, uint64_t da, uint64_t db, int scale) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\nwgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, %64, %65, p, 1, 1, %67, %68;\n}\n" : "+f"(d[0]),"+f"(d[1]),"+f"(d[2]),"+f"(d[3]),"+f"(d[4]),"+f"(d[5]),"+f"(d[6]),"+f"(d[7]),"+f"(d[8]),"+f"(d[9]),"+f"(d[10]),"+f"(d[11]),"+f"(d[12]),"+f"(d[13]),"+f"(d[14]),"+f"(d[15]),"+f"(d[16]),"+f"(d[17]),"+f"(d[18]),"+f"(d[19]),"+f"(d[20]),"+f"(d[21]),"+f"(d[22]),"+f"(d[23]),"+f"(d[24]),"+f"(d[25]),"+f"(d[26]),"+f"(d[27]),"+f"(d[28]),"+f"(d[29]),"+f"(d[30]),"+f"(d[31]),"+f"(d[32]),"+f"(d[33]),"+f"(d[34]),"+f"(d[35]),"+f"(d[36]),"+f"(d[37]),"+f"(d[38]),"+f"(d[39]),"+f"(d[40]),"+f"(d[41]),"+f"(d[42]),"+f"(d[43]),"+f"(d[44]),"+f"(d[45]),"+f"(d[46]),"+f"(d[47]),"+f"(d[48]),"+f"(d[49]),"+f"(d[50]),"+f"(d[51]),"+f"(d[52]),"+f"(d[53]),"+f"(d[54]),"+f"(d[55]),"+f"(d[56]),"+f"(d[57]),"+f"(d[58]),"+f"(d[59]),"+f"(d[60]),"+f"(d[61]),"+f"(d[62]),"+f"(d[63]) : "l"(da), "l"(db), "r"(scale), "n"(TA), "n"(TB));
}

// element (mn, k) of an operand with W rows: K-major or MN-major core matrices (8x8, 128 B).
// major 2/3: K-major/MN-major with the 128-byte swizzle (16-byte chunk c of 128-byte row r of
// a 1024-byte atom stored at chunk c ^ r; K = 64 elements is one row of a K-major operand).
__host__ __device__ inline int slot(int major, int W, int mn, int k) {
  if (major == 2) return mn * 64 + (((k / 8) ^ (mn % 8)) * 8) + k % 8;
  if (major == 3)
    return (k / 8) * (W * 8) + (mn / 64) * 512 + (k % 8) * 64 + ((((mn % 64) / 8) ^ (k % 8)) * 8) + mn % 8;
  if (major == 0) return (mn / 8) * (K / 8) * 64 + (k / 8) * 64 + (mn % 8) * 8 + k % 8;
  return (k / 8) * (W / 8) * 64 + (mn / 8) * 64 + (k % 8) * 8 + mn % 8;
}

template <int TA, int TB>
__global__ void probe(const __nv_bfloat16* ga, const __nv_bfloat16* gb, float* out, int lboA,
                      int sboA, int lboB, int sboB, int kstepA, int kstepB, int swzA, int swzB) {
  __shared__ alignas(1024) __nv_bfloat16 sa[M * K];
  __shared__ alignas(1024) __nv_bfloat16 sb[N * K];
  for (int i = threadIdx.x; i < M * K; i += 128) sa[i] = ga[i];
  for (int i = threadIdx.x; i < N * K; i += 128) sb[i] = gb[i];
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  float d[N / 2];
  for (int i = 0; i < N / 2; ++i) d[i] = 0.f;
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
  for (int ks = 0; ks < K / 16; ++ks)
    mma<TA, TB>(d, desc(sa + ks * kstepA, lboA, sboA, swzA), desc(sb + ks * kstepB, lboB, sboB, swzB), ks > 0);
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
  int t = threadIdx.x, w = t / 32, lane = t % 32, g = lane / 4, q = lane % 4;
  for (int j = 0; j < N / 8; ++j)
    for (int c = 0; c < 4; ++c) {
      int row = 16 * w + g + (c / 2) * 8, col = 8 * j + 2 * q + c % 2;
      out[row * N + col] = d[4 * j + c];
    }
}

// Throughput: 2 warpgroups, each 64 x N of a 128 x N tile, 4 k16 steps per iteration.
template <int TA, int TB>
__global__ void __launch_bounds__(256) speed(float* out, int iters, int majorA, int majorB) {
  __shared__ alignas(128) __nv_bfloat16 sa[2 * M * K];
  __shared__ alignas(128) __nv_bfloat16 sb[N * K];
  for (int i = threadIdx.x; i < 2 * M * K; i += 256) sa[i] = __float2bfloat16(0.001f * (i % 7));
  for (int i = threadIdx.x; i < N * K; i += 256) sb[i] = __float2bfloat16(0.001f * (i % 5));
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  const int wg = threadIdx.x / 128;
  const __nv_bfloat16* a = sa + wg * M * K;
  uint32_t lboA = majorA ? (M / 8) * 128 : 128, sboA = majorA ? 128 : (K / 8) * 128;
  uint32_t lboB = majorB ? (N / 8) * 128 : 128, sboB = majorB ? 128 : (K / 8) * 128;
  int kstepA = majorA ? 2 * (M / 8) * 64 : 128, kstepB = majorB ? 2 * (N / 8) * 64 : 128;
  float d[N / 2];
  for (int i = 0; i < N / 2; ++i) d[i] = 0.f;
  for (int it = 0; it < iters; ++it) {
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
    for (int ks = 0; ks < K / 16; ++ks)
      mma<TA, TB>(d, desc(a + ks * kstepA, lboA, sboA), desc(sb + ks * kstepB, lboB, sboB), 1);
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
  }
  float s = 0;
  for (int i = 0; i < N / 2; ++i) s += d[i];
  out[blockIdx.x * 256 + threadIdx.x] = s;
}

static float bf(float x) { return __bfloat162float(__float2bfloat16(x)); }

template <int TA, int TB>
void run(const char* name, int lboA, int sboA, int lboB, int sboB, int kstepA, int kstepB, int LA = TA,
         int LB = TB) {
  std::vector<float> A(M * K), B(N * K);
  for (auto& x : A) x = bf((rand() % 17 - 8) / 8.f);
  for (auto& x : B) x = bf((rand() % 13 - 6) / 8.f);
  std::vector<__nv_bfloat16> la(M * K), lb(N * K);
  for (int m = 0; m < M; ++m)
    for (int k = 0; k < K; ++k) la[slot(LA, M, m, k)] = __float2bfloat16(A[m * K + k]);
  for (int n = 0; n < N; ++n)
    for (int k = 0; k < K; ++k) lb[slot(LB, N, n, k)] = __float2bfloat16(B[n * K + k]);
  __nv_bfloat16 *da, *db;
  float* dout;
  cudaMalloc(&da, la.size() * 2);
  cudaMalloc(&db, lb.size() * 2);
  cudaMalloc(&dout, M * N * 4);
  cudaMemcpy(da, la.data(), la.size() * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(db, lb.data(), lb.size() * 2, cudaMemcpyHostToDevice);
  cudaMemset(dout, 0xff, M * N * 4);
  probe<TA, TB><<<1, 128>>>(da, db, dout, lboA, sboA, lboB, sboB, kstepA, kstepB, LA >= 2, LB >= 2);
  cudaError_t e = cudaDeviceSynchronize();
  std::vector<float> o(M * N);
  cudaMemcpy(o.data(), dout, M * N * 4, cudaMemcpyDeviceToHost);
  double err = 0;
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      double s = 0;
      for (int k = 0; k < K; ++k) s += (double)A[m * K + k] * B[n * K + k];
      err = fmax(err, fabs(s - o[m * N + n]));
    }
  printf("%-40s %s max err %g\n", name, cudaGetErrorString(e), err);
  cudaFree(da); cudaFree(db); cudaFree(dout);
}

template <int TA, int TB>
void time(const char* name) {
  float* o;
  cudaMalloc(&o, 132 * 4 * 256 * 4);
  int iters = 20000, blocks = 132 * 2;
  speed<TA, TB><<<blocks, 256>>>(o, 10, TA, TB);
  cudaEvent_t a, b;
  cudaEventCreate(&a); cudaEventCreate(&b);
  cudaEventRecord(a);
  speed<TA, TB><<<blocks, 256>>>(o, iters, TA, TB);
  cudaEventRecord(b);
  cudaEventSynchronize(b);
  float ms;
  cudaEventElapsedTime(&ms, a, b);
  double fl = 2.0 * blocks * iters * 128.0 * N * K;
  printf("%-40s %s %.1f TFLOP/s\n", name, cudaGetErrorString(cudaGetLastError()), fl / ms / 1e9);
  cudaFree(o);
}

int main() {
  setvbuf(stdout, nullptr, _IONBF, 0);
  const int kA = M / 8 * 128, kB = N / 8 * 128, kK = K / 8 * 128;
  // K-major: core matrices 128 B apart along K, K/8*128 B apart along M/N.
  run<0, 0>("A K, B K: LBO=Kdir SBO=MNdir", 128, kK, 128, kK, 128, 128);
  // MN-major: 128 B apart along MN, W/8*128 B apart along K; a k16 step is 2 K-groups.
  run<1, 0>("A MN: LBO=Kdir SBO=MNdir", kA, 128, 128, kK, 2 * kA / 2, 128);
  run<0, 1>("B MN: LBO=Kdir SBO=MNdir", 128, kK, kB, 128, 128, 2 * kB / 2);
  // 128-byte swizzle: K-major SBO = 1024 (8-row atoms), LBO unused, a k16 step 32 bytes along
  // the row; MN-major: atoms of 64 (MN) x 8 (K), both readings of LBO/SBO tried.
  run<0, 0>("SW128 A K, B K", 16, 1024, 16, 1024, 16, 16, 2, 2);
  run<1, 1>("SW128 A MN, B MN: LBO=MNatom SBO=Kgroup", 1024, M * 16, 1024, N * 16, 2 * M * 8, 2 * N * 8, 3, 3);
  run<1, 1>("SW128 A MN, B MN: LBO=Kgroup SBO=MNatom", M * 16, 1024, N * 16, 1024, 2 * M * 8, 2 * N * 8, 3, 3);
  time<0, 0>("speed A K, B K");
  time<0, 1>("speed A K, B MN");
  time<1, 1>("speed A MN, B MN");
  return 0;
}
