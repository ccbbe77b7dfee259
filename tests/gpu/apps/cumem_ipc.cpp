// Driver entry points: physical memory shared between two processes on one GPU, as NCCL shares its
// buffers with the other ranks (cuMem path). The exporter creates a handle that may be exported as
// a file descriptor, maps it, fills it with a byte, exports it and passes the descriptor over a
// Unix socket (SCM_RIGHTS); the importer imports it (cuMemImportFromShareableHandle), maps it,
// reads the byte back, unmaps and releases it, and says so; then the exporter frees its own.
// Built with g++ against the machine's libcuda (-lcuda: the direct path). Prints, per process:
//   exporter handle <hex> size <bytes>      importer handle <hex> size <bytes> value <hex>
// and `done` from the exporter once both finished.
#include <cuda.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

void check(const char* what, CUresult r) {
    if (r == CUDA_SUCCESS) return;
    const char* name = nullptr;
    cuGetErrorName(r, &name);
    std::fprintf(stderr, "%s failed: %d %s\n", what, static_cast<int>(r), name ? name : "?");
    std::exit(1);
}

CUcontext context() {
    check("cuInit", cuInit(0));
    CUdevice dev = 0;
    check("cuDeviceGet", cuDeviceGet(&dev, 0));
    CUcontext ctx = nullptr;
    check("cuDevicePrimaryCtxRetain", cuDevicePrimaryCtxRetain(&ctx, dev));
    check("cuCtxSetCurrent", cuCtxSetCurrent(ctx));
    return ctx;
}

CUmemAllocationProp properties() {
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    return prop;
}

/// Reserves a range of `size`, maps `handle` there and gives the device read-write access.
CUdeviceptr map_here(CUmemGenericAllocationHandle handle, size_t size) {
    CUdeviceptr va = 0;
    check("cuMemAddressReserve", cuMemAddressReserve(&va, size, 0, 0, 0));
    check("cuMemMap", cuMemMap(va, size, 0, handle, 0));
    CUmemAccessDesc access{};
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = 0;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    check("cuMemSetAccess", cuMemSetAccess(va, size, &access, 1));
    return va;
}

void unmap_here(CUdeviceptr va, size_t size) {
    check("cuMemUnmap", cuMemUnmap(va, size));
    check("cuMemAddressFree", cuMemAddressFree(va, size));
}

/// One byte with room for one descriptor beside it (SCM_RIGHTS). Not copied: it points into itself.
struct FdMessage {
    char byte = 'f';
    iovec iov{&byte, 1};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    msghdr msg{};
    FdMessage() {
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control;
        msg.msg_controllen = sizeof control;
    }
    FdMessage(const FdMessage&) = delete;
    FdMessage& operator=(const FdMessage&) = delete;
};

void send_fd(int sock, int fd) {
    FdMessage m;
    cmsghdr* c = CMSG_FIRSTHDR(&m.msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
    if (sendmsg(sock, &m.msg, 0) != 1) {
        std::perror("sendmsg");
        std::exit(1);
    }
}

int receive_fd(int sock) {
    FdMessage m;
    if (recvmsg(sock, &m.msg, 0) != 1) {
        std::perror("recvmsg");
        std::exit(1);
    }
    cmsghdr* c = CMSG_FIRSTHDR(&m.msg);
    if (!c || c->cmsg_type != SCM_RIGHTS) {
        std::fprintf(stderr, "no descriptor received\n");
        std::exit(1);
    }
    int fd = -1;
    std::memcpy(&fd, CMSG_DATA(c), sizeof(int));
    return fd;
}

int importer(int sock, size_t size) {
    context();
    const int fd = receive_fd(sock);
    CUmemGenericAllocationHandle handle = 0;
    check("cuMemImportFromShareableHandle",
          cuMemImportFromShareableHandle(&handle, reinterpret_cast<void*>(static_cast<uintptr_t>(fd)),
                                         CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
    close(fd);
    const CUdeviceptr va = map_here(handle, size);
    unsigned char value = 0;
    check("cuMemcpyDtoH", cuMemcpyDtoH(&value, va + size - 1, 1));
    unmap_here(va, size);
    check("cuMemRelease", cuMemRelease(handle));
    std::printf("importer handle %llx size %zu value %x\n", static_cast<unsigned long long>(handle), size, value);
    std::fflush(stdout);
    char done = 'd';
    return write(sock, &done, 1) == 1 ? 0 : 1;
}

}  // namespace

int main() {
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    int socks[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, socks) != 0) {
        std::perror("socketpair");
        return 1;
    }
    // Both processes start CUDA after the fork, each its own.
    size_t size = size_t{64} << 20;
    const pid_t child = fork();
    if (child < 0) return 1;
    if (child == 0) {
        close(socks[0]);
        return importer(socks[1], size);
    }
    close(socks[1]);
    context();
    CUmemAllocationProp prop = properties();
    size_t granularity = 0;
    check("cuMemGetAllocationGranularity",
          cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    size = (size + granularity - 1) / granularity * granularity;  // 64 MiB: a multiple of 2 MiB
    CUmemGenericAllocationHandle handle = 0;
    check("cuMemCreate", cuMemCreate(&handle, size, &prop, 0));
    const CUdeviceptr va = map_here(handle, size);
    check("cuMemsetD8", cuMemsetD8(va, 0x5a, size));
    check("cuCtxSynchronize", cuCtxSynchronize());
    int fd = -1;
    check("cuMemExportToShareableHandle",
          cuMemExportToShareableHandle(&fd, handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    std::printf("exporter handle %llx size %zu\n", static_cast<unsigned long long>(handle), size);
    send_fd(socks[0], fd);
    close(fd);
    char done = 0;
    const bool said = read(socks[0], &done, 1) == 1 && done == 'd';
    int status = 0;
    waitpid(child, &status, 0);
    unmap_here(va, size);
    check("cuMemRelease", cuMemRelease(handle));
    if (!said || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        std::fprintf(stderr, "importer failed (status %d)\n", status);
        return 1;
    }
    std::printf("done\n");
    return 0;
}
