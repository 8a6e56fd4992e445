// System shared memory regions: shm_open + mmap at register, windows that keep a region mapped,
// and the copies between regions and tensors.

#include "serve/shared_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "runtime/device_ipc.h"
#include "serve/echo.h"

namespace streamline::serve {

struct SharedMemoryRegistry::Mapping {
  SystemRegionInfo info;
  void* base = MAP_FAILED;
  size_t mapped = 0;  // offset + byte_size
  ~Mapping() {
    if (base != MAP_FAILED) munmap(base, mapped);
  }
  char* data() const { return static_cast<char*>(base) + info.offset; }
};

struct SharedMemoryRegistry::CudaRegion {
  CudaRegionInfo info;
  std::shared_ptr<runtime::DeviceIpcMemory> memory;
};

Status SharedMemoryRegistry::register_system(const std::string& name, const std::string& key, uint64_t offset,
                                             uint64_t byte_size) {
  const std::string what = "shared memory region '" + echo(name) + "'";
  if (name.empty()) return invalid_argument("a shared memory region needs a name");
  if (key.empty()) return invalid_argument(what + ": the key is empty");
  if (byte_size == 0) return invalid_argument(what + ": byte_size is 0");
  if (offset > (uint64_t{1} << 48) || byte_size > (uint64_t{1} << 48))
    return invalid_argument(what + ": offset or byte_size is out of range");
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (system_.count(name)) return invalid_argument(what + " is already registered");
  }
  const int fd = shm_open(key.c_str(), O_RDWR, 0);
  if (fd < 0)
    return errno == ENOENT ? not_found(what + ": no shared memory object '" + echo(key) + "'")
                           : unavailable(what + ": cannot open '" + echo(key) + "': " + std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int e = errno;
    close(fd);
    return unavailable(what + ": cannot stat '" + echo(key) + "': " + std::strerror(e));
  }
  if (offset + byte_size > static_cast<uint64_t>(st.st_size)) {
    close(fd);
    return invalid_argument(what + ": offset " + std::to_string(offset) + " + byte_size " + std::to_string(byte_size) +
                            " is past the end of '" + echo(key) + "' (" + std::to_string(st.st_size) + " bytes)");
  }
  auto m = std::make_shared<Mapping>();
  m->info = {name, key, offset, byte_size};
  m->mapped = static_cast<size_t>(offset + byte_size);
  m->base = mmap(nullptr, m->mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int e = errno;
  close(fd);
  if (m->base == MAP_FAILED) return unavailable(what + ": cannot map '" + echo(key) + "': " + std::strerror(e));
  std::lock_guard<std::mutex> lock(mu_);
  if (!system_.emplace(name, std::move(m)).second) return invalid_argument(what + " is already registered");
  return ok_status();
}

Status SharedMemoryRegistry::unregister_system(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  if (name.empty())
    system_.clear();
  else
    system_.erase(name);
  return ok_status();
}

Result<std::vector<SystemRegionInfo>> SharedMemoryRegistry::system_status(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<SystemRegionInfo> out;
  for (const auto& [n, m] : system_)
    if (name.empty() || n == name) out.push_back(m->info);
  if (!name.empty() && out.empty()) return not_found("no shared memory region '" + echo(name) + "' is registered");
  return out;
}

Status SharedMemoryRegistry::register_cuda(const std::string& name, const std::string& raw_handle, int64_t device_id,
                                           uint64_t byte_size) {
  const std::string what = "CUDA shared memory region '" + echo(name) + "'";
  if (name.empty()) return invalid_argument("a shared memory region needs a name");
  if (byte_size == 0) return invalid_argument(what + ": byte_size is 0");
  if (device_id < 0 || device_id > 1024) return invalid_argument(what + ": device_id is out of range");
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (cuda_.count(name)) return invalid_argument(what + " is already registered");
  }
  auto memory = runtime::DeviceIpcMemory::open(raw_handle, static_cast<int>(device_id), static_cast<size_t>(byte_size));
  if (!memory.ok()) return Status(memory.status().code(), what + ": " + memory.status().message());
  auto r = std::make_shared<CudaRegion>();
  r->info = {name, device_id, byte_size};
  r->memory = std::move(*memory);
  std::lock_guard<std::mutex> lock(mu_);
  if (!cuda_.emplace(name, std::move(r)).second) return invalid_argument(what + " is already registered");
  return ok_status();
}

Status SharedMemoryRegistry::unregister_cuda(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  if (name.empty())
    cuda_.clear();
  else
    cuda_.erase(name);
  return ok_status();
}

Result<std::vector<CudaRegionInfo>> SharedMemoryRegistry::cuda_status(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<CudaRegionInfo> out;
  for (const auto& [n, r] : cuda_)
    if (name.empty() || n == name) out.push_back(r->info);
  if (!name.empty() && out.empty()) return not_found("no CUDA shared memory region '" + echo(name) + "' is registered");
  return out;
}

Status SharedMemoryRegistry::read_region(const ShmRef& ref, void* dst, size_t n) const {
  std::shared_ptr<CudaRegion> cuda;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!system_.count(ref.region))
      if (auto it = cuda_.find(ref.region); it != cuda_.end()) cuda = it->second;
  }
  if (cuda) return cuda->memory->read(static_cast<size_t>(ref.offset), dst, n);
  SL_ASSIGN_OR_RETURN(ShmWindow w, window(ref));
  if (n > w.size) return invalid_argument("shared memory region '" + echo(ref.region) + "' is too small");
  if (n > 0) std::memcpy(dst, w.data, n);
  return ok_status();
}

Status SharedMemoryRegistry::write_region(const ShmRef& ref, const void* src, size_t n) const {
  std::shared_ptr<CudaRegion> cuda;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!system_.count(ref.region))
      if (auto it = cuda_.find(ref.region); it != cuda_.end()) cuda = it->second;
  }
  if (cuda) {
    if (n > ref.byte_size)
      return invalid_argument(std::to_string(n) + " bytes do not fit shared_memory_byte_size " +
                              std::to_string(ref.byte_size));
    return cuda->memory->write(static_cast<size_t>(ref.offset), src, n);
  }
  SL_ASSIGN_OR_RETURN(ShmWindow w, window(ref));
  if (n > w.size)
    return invalid_argument(std::to_string(n) + " bytes do not fit shared_memory_byte_size " + std::to_string(w.size));
  if (n > 0) std::memcpy(w.data, src, n);
  return ok_status();
}

Result<ShmWindow> SharedMemoryRegistry::window(const ShmRef& ref) const {
  std::shared_ptr<Mapping> m;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = system_.find(ref.region);
    if (it == system_.end()) return not_found("shared memory region '" + echo(ref.region) + "' is not registered");
    m = it->second;
  }
  if (ref.offset > m->info.byte_size || ref.byte_size > m->info.byte_size - ref.offset)
    return invalid_argument("shared memory region '" + echo(ref.region) + "': offset " + std::to_string(ref.offset) +
                            " + byte_size " + std::to_string(ref.byte_size) + " is past its " +
                            std::to_string(m->info.byte_size) + " bytes");
  ShmWindow w;
  w.data = m->data() + ref.offset;
  w.size = static_cast<size_t>(ref.byte_size);
  w.hold = std::move(m);
  return w;
}

Status SharedMemoryRegistry::read_inputs(const std::vector<ShmInput>& inputs, InferRequest* request) const {
  for (const ShmInput& in : inputs) {
    const std::string what = "input '" + echo(in.name) + "': ";
    int64_t numel = 1;
    for (int64_t d : in.dims) {
      if (d < 0 || (d != 0 && numel > (int64_t{1} << 40) / d)) return invalid_argument(what + "bad shape");
      numel *= d;
    }
    const uint64_t nbytes = static_cast<uint64_t>(numel) * dtype_size(in.dtype);
    if (in.ref.byte_size != nbytes)
      return invalid_argument(what + "shared_memory_byte_size " + std::to_string(in.ref.byte_size) +
                              " does not match its shape (" + std::to_string(nbytes) + " bytes)");
    Tensor t = Tensor::empty(in.dtype, Shape(in.dims));
    if (!t.raw() && numel > 0) return resource_exhausted(what + "cannot allocate its tensor");
    if (Status s = read_region(in.ref, t.raw(), static_cast<size_t>(nbytes)); !s.ok())
      return Status(s.code(), what + s.message());
    request->inputs[in.name] = std::move(t);
  }
  return ok_status();
}

Status SharedMemoryRegistry::write_output(const std::string& name, const Tensor& t, const ShmRef& ref) const {
  Status s = write_region(ref, t.raw(), t.nbytes());
  if (!s.ok()) return Status(s.code(), "output '" + echo(name) + "': " + s.message());
  return ok_status();
}

}  // namespace streamline::serve
