# The sandbox helper's cost without the addon (issue 22; docs/PERFORMANCE.md,
# "The full boundary without fork copies"): posix_spawn + waitpid of
# /bin/true, of two builds of the helper with the namespaces (the new one also
# with a kept template mount namespace), and of bwrap, interleaved; minimum,
# p25 and median in ms. The kept namespaces come from each helper's --anchor,
# as the addon makes them. `show` as a last argument prints what a run sees
# instead (its mounts, /dev, a write in and out of the root, /run, its pid).
#   mkdir -p /tmp/sb; git stash; node scripts/build-helper.mjs --out /tmp/old; git stash pop
#   python3 scripts/probes/sandbox-helper-loop.py 300 /tmp/old/exec-native-sandbox ./exec-native-sandbox
import os, sys, time, subprocess
# usage: python3 scripts/probes/sandbox-helper-loop.py N OLD_HELPER NEW_HELPER (the same path twice to time one)
O=os.path.abspath(sys.argv[2]); H=os.path.abspath(sys.argv[3])
def anchor(h, extra):
  a=subprocess.Popen([h,'--anchor']+extra+['--','-'],stdin=subprocess.PIPE,stdout=subprocess.PIPE)
  assert a.stdout.readline()==b'ready\n'
  fds=[os.open(f'/proc/{a.pid}/ns/{k}',os.O_RDONLY) for k in ('user','net','mnt')]
  a.stdin.close(); a.wait(); return fds
me=os.getpid()
ou,on,_=anchor(O,[])
u,n,m=anchor(H,['--hide','/run'])
os.chdir('/tmp/sb')
W=['--write','/tmp/sb','--write','/dev/null']
J=lambda u,n:['--join-user',f'/proc/{me}/fd/{u}','--join-net',f'/proc/{me}/fd/{n}']
cases={
 'true':['/bin/true'],
 'old-ns':[O,'--ns']+J(ou,on)+['--hide','/run']+W+['--','/bin/true'],
 'new-ns':[H,'--ns']+J(u,n)+['--hide','/run']+W+['--','/bin/true'],
 'tmpl-ns':[H,'--ns']+J(u,n)+['--template',f'/proc/{me}/fd/{m}','--hide','/run']+W+['--','/bin/true'],
 'bwrap':['/usr/bin/bwrap','--ro-bind','/','/','--bind','/tmp/sb','/tmp/sb','--unshare-net','--unshare-pid','--proc','/proc','/bin/true'],
}
if sys.argv[-1]=='show':
  for k in ('new-ns','tmpl-ns'):
    a=cases[k][:-1]+['/bin/sh','-c','cat /proc/self/mountinfo | wc -l; ls /dev; touch /tmp/sb/x && echo wrote; touch /etc/x 2>&1; ls /run; echo $$; ls /proc | head -3; pwd']
    subprocess.run(a)
  sys.exit()
N=int(sys.argv[1])
res={k:[] for k in cases}
for i in range(N):
  for k,argv in cases.items():
    t=time.perf_counter(); p=os.posix_spawn(argv[0],argv,os.environ); _,st=os.waitpid(p,0); res[k].append(time.perf_counter()-t)
    if st!=0 and i==0: print(k,'status',st)
for k,v in res.items():
  v.sort(); print(f'{k:12s} min {v[0]*1e3:.3f} p25 {v[len(v)//4]*1e3:.3f} med {v[len(v)//2]*1e3:.3f}')
