// The kernel's part of a namespaced sandbox run, step by step (issue 22;
// docs/PERFORMANCE.md, "The full boundary without fork copies"): each mode
// times fork + waitpid of a child that goes one step further, minimum and
// median of N, in ms. A kept user + network namespace is made first and
// joined, as the addon's anchor does; /tmp/sb must exist (the writable root).
// "full vm/vfork" makes the init with clone(CLONE_VM) and the command with
// vfork, as the helper now does. Run by scripts/probes/sandbox-steps.sh.
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <sys/syscall.h>
#include <time.h>
#include <sys/stat.h>
#include <signal.h>
#include <linux/mount.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e3+t.tv_nsec/1e6;}
static void wr(const char*p,const char*s){int f=open(p,O_WRONLY);write(f,s,strlen(s));close(f);}
int userfd,netfd;
static void ro(const char*p,int ro,int rec){struct mount_attr a={0};if(ro)a.attr_set=MOUNT_ATTR_RDONLY;else a.attr_clr=MOUNT_ATTR_RDONLY;
 if(syscall(SYS_mount_setattr,AT_FDCWD,p,rec?AT_RECURSIVE:0,&a,sizeof a))perror("setattr");}
static char stk[65536];
static int initfn(void*a){ mount("proc","/proc","proc",MS_NOSUID|MS_NODEV|MS_NOEXEC,NULL);
  pid_t c=vfork(); if(c==0){char*v[]={"/bin/true",0}; execv(v[0],v); _exit(127);} int st; waitpid(c,&st,0); _exit(0);}
static void child(int mode){
  if(mode==7){char*a[]={"/bin/true",0}; execv(a[0],a);_exit(1);}
  if(mode==8){ setns(userfd,CLONE_NEWUSER); setns(netfd,CLONE_NEWNET); unshare(CLONE_NEWNS|CLONE_NEWIPC);
    mount(NULL,"/",NULL,MS_REC|MS_PRIVATE,NULL); ro("/",1,1);
    mount("/tmp/sb","/tmp/sb",NULL,MS_BIND|MS_REC,NULL); ro("/tmp/sb",0,1);
    mount("tmpfs","/run","tmpfs",MS_NOSUID|MS_NODEV,"mode=755,size=1m");
    mount("tmpfs","/dev","tmpfs",MS_NOSUID|MS_NOEXEC,"mode=755,size=64k");
    mkdir("/dev/shm",0777); mount("tmpfs","/dev/shm","tmpfs",MS_NOSUID|MS_NODEV,"mode=1777");
    pid_t i=clone(initfn,stk+sizeof stk,CLONE_VM|CLONE_NEWPID|SIGCHLD,0); int st; waitpid(i,&st,0); _exit(0);}

  if(mode>=1){ if(setns(userfd,CLONE_NEWUSER))perror("setns u"); setns(netfd,CLONE_NEWNET);}
  if(mode>=2){ if(unshare(CLONE_NEWNS|CLONE_NEWIPC))perror("unshare");}
  if(mode>=3){ mount(NULL,"/",NULL,MS_REC|MS_PRIVATE,NULL); ro("/",1,1);
    mount("/tmp/sb","/tmp/sb",NULL,MS_BIND|MS_REC,NULL); ro("/tmp/sb",0,1);
    if(mount("tmpfs","/run","tmpfs",MS_NOSUID|MS_NODEV,"mode=755,size=1m"))perror("run");
    if(mount("tmpfs","/dev","tmpfs",MS_NOSUID|MS_NOEXEC,"mode=755,size=64k"))perror("dev");
    mkdir("/dev/shm",0777); mount("tmpfs","/dev/shm","tmpfs",MS_NOSUID|MS_NODEV,"mode=1777");}
  if(mode>=4){ unshare(CLONE_NEWPID); pid_t i=fork(); if(i==0){
      if(mount("proc","/proc","proc",MS_NOSUID|MS_NODEV|MS_NOEXEC,NULL))perror("proc");
      if(mode>=5){pid_t c=fork(); if(c==0){ if(mode>=6){char*a[]={"/bin/true",0}; execv(a[0],a);} _exit(0);} int st; waitpid(c,&st,0);}
      _exit(0);}
    int st; waitpid(i,&st,0);}
  _exit(0);
}
int main(int argc,char**argv){
  int n=atoi(argv[1]);
  int p[2];pipe(p);pid_t a=fork();
  if(a==0){uid_t u=getuid();gid_t g=getgid();unshare(CLONE_NEWUSER|CLONE_NEWNET);wr("/proc/self/setgroups","deny");char b[64];sprintf(b,"%d %d 1",u,u);wr("/proc/self/uid_map",b);sprintf(b,"%d %d 1",g,g);wr("/proc/self/gid_map",b);write(p[1],"r",1);pause();}
  char c;read(p[0],&c,1);char path[64];sprintf(path,"/proc/%d/ns/user",a);userfd=open(path,O_RDONLY);sprintf(path,"/proc/%d/ns/net",a);netfd=open(path,O_RDONLY);kill(a,9);waitpid(a,0,0);
  chdir("/tmp/sb");
  double best[10];double *all[10];for(int m=0;m<9;m++){best[m]=1e9;all[m]=malloc(sizeof(double)*n);}
  for(int i=0;i<n;i++)for(int m=0;m<9;m++){double t=now();pid_t k=fork();if(k==0)child(m);int st;waitpid(k,&st,0);double d=now()-t;all[m][i]=d;if(d<best[m])best[m]=d;}
  int cmp(const void*a,const void*b){double x=*(double*)a,y=*(double*)b;return x<y?-1:x>y;}
  const char*names[]={"fork+exit","+setns user/net","+unshare mnt/ipc","+mounts","+pidns+init+proc","+cmd fork","+exec true","plain fork+exec","full vm/vfork"};
  for(int m=0;m<9;m++){qsort(all[m],n,sizeof(double),cmp);printf("%-20s min %.3f med %.3f\n",names[m],best[m],all[m][n/2]);}
}
