// Does Wine's ConPTY deliver a child's output? Run by scripts/probes/conpty.sh.
#define _WIN32_WINNT 0x0A00
#include <windows.h>
#include <stdio.h>
#ifndef PROC_THREAD_ATTRIBUTE_PSEUDOCONSOLE
#define PROC_THREAD_ATTRIBUTE_PSEUDOCONSOLE 0x00020016
#endif
typedef HRESULT (WINAPI *CPC)(COORD, HANDLE, HANDLE, DWORD, void**);
int main(void){
  HANDLE inR,inW,outR,outW;
  CreatePipe(&inR,&inW,NULL,0); CreatePipe(&outR,&outW,NULL,0);
  CPC cpc=(CPC)GetProcAddress(GetModuleHandleA("kernel32.dll"),"CreatePseudoConsole");
  if(!cpc){printf("no CreatePseudoConsole\n");return 1;}
  void* hpc; COORD sz={80,24};
  HRESULT hr=cpc(sz,inR,outW,0,&hpc);
  printf("CreatePseudoConsole hr=%lx\n",hr); fflush(stdout);
  if(hr) return 1;
  STARTUPINFOEXW si; ZeroMemory(&si,sizeof si); si.StartupInfo.cb=sizeof si; si.StartupInfo.dwFlags=STARTF_USESTDHANDLES;
  SIZE_T n=0; InitializeProcThreadAttributeList(NULL,1,0,&n);
  si.lpAttributeList=HeapAlloc(GetProcessHeap(),0,n);
  InitializeProcThreadAttributeList(si.lpAttributeList,1,0,&n);
  UpdateProcThreadAttribute(si.lpAttributeList,0,PROC_THREAD_ATTRIBUTE_PSEUDOCONSOLE,hpc,sizeof hpc,NULL,NULL);
  PROCESS_INFORMATION pi; wchar_t cmd[]=L"cmd.exe /c echo hello-from-conpty";
  if(!CreateProcessW(NULL,cmd,NULL,NULL,FALSE,EXTENDED_STARTUPINFO_PRESENT,NULL,NULL,&si.StartupInfo,&pi)){printf("CreateProcess failed %lu\n",GetLastError());return 1;}
  CloseHandle(outW); CloseHandle(inR);
  WaitForSingleObject(pi.hProcess,5000);
  DWORD code; GetExitCodeProcess(pi.hProcess,&code); printf("exit %lu\n",code); fflush(stdout);
  char buf[4096]; DWORD got; DWORD avail=0;
  Sleep(1500); PeekNamedPipe(outR,NULL,0,NULL,&avail,NULL);
  printf("avail %lu\n",avail);
  if(avail && ReadFile(outR,buf,sizeof buf-1,&got,NULL)){buf[got]=0; printf("read %lu: ",got); for(DWORD i=0;i<got;i++){unsigned char c=buf[i]; if(c<32||c>126) printf("\\x%02x",c); else putchar(c);} printf("\n");}
  return 0;
}
