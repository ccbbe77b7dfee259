// libmg_nvtx_b.so: another NVTX copy: wide strings, event attributes, named domains and registered
// strings (see nvtx_lib.h).
#include <nvtx3/nvToolsExt.h>

#include <cstring>

#include "nvtx_lib.h"

#define NVTX_LIB_FN extern "C" __attribute__((visibility("default")))

namespace {

nvtxEventAttributes_t ascii_attributes(const char* message) {
    nvtxEventAttributes_t a;
    std::memset(&a, 0, sizeof(a));
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.colorType = NVTX_COLOR_ARGB;
    a.color = 0xff00ff00;
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = message;
    return a;
}

}  // namespace

NVTX_LIB_FN int nvtx_b_push_w(const wchar_t* message) {
    nvtxEventAttributes_t a = ascii_attributes(nullptr);
    a.messageType = NVTX_MESSAGE_TYPE_UNICODE;
    a.message.unicode = message;
    return nvtxRangePushEx(&a);
}

NVTX_LIB_FN int nvtx_b_pop() { return nvtxRangePop(); }

NVTX_LIB_FN uint64_t nvtx_b_start_registered(const char* domain, const char* message) {
    nvtxDomainHandle_t d = nvtxDomainCreateA(domain);
    nvtxEventAttributes_t a = ascii_attributes(nullptr);
    a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    a.message.registered = nvtxDomainRegisterStringA(d, message);
    return nvtxDomainRangeStartEx(d, &a);
}

NVTX_LIB_FN void nvtx_b_end_in_domain(const char* domain, uint64_t id) {
    nvtxDomainRangeEnd(nvtxDomainCreateA(domain), id);
}

NVTX_LIB_FN int nvtx_b_domain_push(const char* domain, const char* message) {
    nvtxEventAttributes_t a = ascii_attributes(message);
    return nvtxDomainRangePushEx(nvtxDomainCreateA(domain), &a);
}

NVTX_LIB_FN int nvtx_b_domain_pop(const char* domain) { return nvtxDomainRangePop(nvtxDomainCreateA(domain)); }

NVTX_LIB_FN void nvtx_b_domain_mark(const char* domain, const char* message) {
    nvtxEventAttributes_t a = ascii_attributes(message);
    nvtxDomainMarkEx(nvtxDomainCreateA(domain), &a);
}

NVTX_LIB_FN void nvtx_b_mark_w(const wchar_t* message) { nvtxMarkW(message); }
