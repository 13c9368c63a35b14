#pragma once
// The CUDA driver API, loaded at run time (dlopen of libcuda.so.1), so that einjit built with
// CUDA still loads and runs its CPU paths on machines without an NVIDIA driver. Every call is
// checked; a failure is an einjit::Error naming the call and the driver's error. Each device
// uses its primary context; all work goes to the legacy default stream, so launches, copies,
// allocations and frees of one process are ordered.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace einjit::runtime::cuda {

using DevicePtr = std::uint64_t;

// Whether a driver and at least one device are present; `why` says what is missing.
bool available(std::string* why = nullptr);
int deviceCount();

struct DeviceInfo {
  std::string name;
  int major = 0, minor = 0; // compute capability
  int multiprocessors = 0;
  std::int64_t sharedPerBlockOptin = 0; // bytes a block may use after opting in
};
const DeviceInfo& deviceInfo(int device);
std::string driverVersion();

// Makes the device's primary context current on this thread (checks the index).
void setDevice(int device);

// Stream-ordered allocation on the default stream; null for zero bytes.
DevicePtr allocate(int device, std::size_t bytes);
void release(int device, DevicePtr p);
void copyToDevice(int device, DevicePtr dst, const void* src, std::size_t bytes);
void copyToHost(int device, void* dst, DevicePtr src, std::size_t bytes);
void copyOnDevice(int device, DevicePtr dst, DevicePtr src, std::size_t bytes);
void zero(int device, DevicePtr p, std::size_t bytes);
void fill(int device, DevicePtr p, std::size_t bytes, unsigned char value);
void synchronize(int device);

// A loaded module (cubin or PTX) and its kernels, unloaded when the last holder lets go.
class Module {
public:
  Module(int device, const std::string& image, const std::vector<std::string>& kernels);
  ~Module();
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  // args: pointers to each kernel argument's value.
  void launch(std::size_t kernel, std::int64_t grid, std::int64_t block, void** args,
              std::size_t sharedBytes = 0) const;
  int device() const { return device_; }

private:
  int device_;
  void* module_ = nullptr;
  std::vector<void*> functions_;
};

// Times device work with events on the default stream (milliseconds).
class Timer {
public:
  explicit Timer(int device);
  ~Timer();
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;
  void start();
  double stop(); // waits for the work recorded since start()

private:
  int device_;
  void* begin_ = nullptr;
  void* end_ = nullptr;
};

} // namespace einjit::runtime::cuda
