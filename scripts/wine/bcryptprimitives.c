/* Wine 8 (Debian 12) has no bcryptprimitives.dll, which Rust's standard
 * library (1.78+) imports for ProcessPrng; Windows 10+ has it. This stand-in,
 * installed into the Wine prefix by scripts/wine-setup.sh, gives the same
 * bytes source as older Rust used: RtlGenRandom (advapi32's SystemFunction036).
 * It is never shipped: only the Wine suite loads it. */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {
  while (len > 0) {
    ULONG n = len > 0x7fffffff ? 0x7fffffff : (ULONG)len;
    if (!SystemFunction036(data, n)) return FALSE;
    data += n;
    len -= n;
  }
  return TRUE;
}
