import { expect } from 'chai';
import { LOOPBACK_CNI_CONFLIST, renderContainerdConfig } from '../../src/real-node/containerd-config.js';
import { buildKubeletConfiguration, kubeletArgs, renderNodeLabels } from '../../src/real-node/kubelet-config.js';
import { cgroupRootFor, nodeLayout } from '../../src/real-node/node-layout.js';
import { RealNodeError } from '../../src/real-node/real-node-error.js';

describe('real-node configuration', () => {
  describe('nodeLayout', () => {
    it('puts every path of the node in its own folder', () => {
      const layout = nodeLayout('/tmp/run', 'rn-a-0');
      const paths = [
        layout.devicePluginDir,
        layout.sysctlDir,
        layout.namespaceReadyFile,
        layout.containerdConfig,
        layout.containerdRoot,
        layout.containerdState,
        layout.containerdSocket,
        layout.runcRoot,
        layout.cniConfDir,
        layout.kubeletRoot,
        layout.kubeletCertDir,
        layout.kubeletConfig,
        layout.kubeletKubeconfig,
        layout.clientCaFile,
        layout.podLogsDir,
        layout.volumePluginDir,
        ...Object.values(layout.logs),
      ];
      for (const path of paths) expect(path.startsWith('/tmp/run/rn-a-0/'), path).to.equal(true);
      expect(new Set(paths).size).to.equal(paths.length);
      expect(cgroupRootFor('rn-a-0')).to.equal('/vgpu-warden-rn-a-0');
    });

    it('refuses a node folder too long for the unix sockets inside it', () => {
      expect(() => nodeLayout(`/tmp/${'x'.repeat(80)}`, 'rn-a-0')).to.throw(RealNodeError, /too long for unix sockets/);
    });
  });

  describe('containerd', () => {
    const text = renderContainerdConfig({
      root: '/n/root',
      state: '/n/state',
      socket: '/n/c.sock',
      runcRoot: '/n/runc',
      cniBinDir: '/usr/lib/cni',
      cniConfDir: '/n/cni',
      sandboxImage: 'registry.k8s.io/pause:3.10',
    });

    it('keeps root, state, sockets and the runc root in the node folder', () => {
      expect(text).to.match(/^root = "\/n\/root"$/m);
      expect(text).to.match(/^state = "\/n\/state"$/m);
      expect(text).to.match(/\[grpc\]\n {2}address = "\/n\/c\.sock"/);
      expect(text).to.match(/\[ttrpc\]\n {2}address = "\/n\/c\.sock\.ttrpc"/);
      expect(text).to.match(/Root = "\/n\/runc"/);
    });

    it('configures CRI for this machine: clamped oom_score_adj, cgroupfs, loopback CNI, loopback stream server, the imported sandbox image', () => {
      expect(text).to.match(/restrict_oom_score_adj = true/);
      expect(text).to.match(/SystemdCgroup = false/);
      expect(text).to.match(/sandbox_image = "registry\.k8s\.io\/pause:3\.10"/);
      expect(text).to.match(/bin_dir = "\/usr\/lib\/cni"\n\s+conf_dir = "\/n\/cni"/);
      expect(text).to.match(/stream_server_address = "127\.0\.0\.1"\n\s+stream_server_port = "0"/);
      expect(text).to.match(/\[metrics\]\n {2}address = ""/);
    });

    it('disables the plugin that would create /opt/containerd and keeps the v1 runtime CRI depends on', () => {
      const disabled = /^disabled_plugins = \[(.*)\]$/m.exec(text)?.[1] ?? '';
      expect(disabled).to.include('"io.containerd.internal.v1.opt"');
      expect(disabled).to.not.include('io.containerd.runtime.v1.linux');
      expect(disabled).to.not.include('io.containerd.grpc.v1.cri');
    });

    it('writes a loopback-only CNI conflist', () => {
      expect(LOOPBACK_CNI_CONFLIST).to.deep.equal({ cniVersion: '1.0.0', name: 'lo', plugins: [{ type: 'loopback' }] });
    });
  });

  describe('kubelet', () => {
    const config = buildKubeletConfiguration({
      port: 10001,
      healthzPort: 10002,
      cgroupRoot: '/vgpu-warden-rn-a-0',
      containerdSocket: '/n/c.sock',
      podLogsDir: '/n/pod-logs',
      volumePluginDir: '/n/volume-plugins',
      clientCaFile: '/n/ca.crt',
    });

    it('listens on loopback ports of its own, with no read-only port', () => {
      expect(config).to.include({
        address: '127.0.0.1',
        port: 10001,
        healthzBindAddress: '127.0.0.1',
        healthzPort: 10002,
        readOnlyPort: 0,
      });
    });

    it('uses its own containerd and cgroup root, cgroupfs, and tolerates cgroup v1 and swap', () => {
      expect(config).to.include({
        containerRuntimeEndpoint: 'unix:///n/c.sock',
        imageServiceEndpoint: 'unix:///n/c.sock',
        cgroupRoot: '/vgpu-warden-rn-a-0',
        cgroupDriver: 'cgroupfs',
        failCgroupV1: false,
        failSwapOn: false,
      });
    });

    it('changes nothing on the host: no iptables chains, no kernel settings, logs and volume plugins in the node folder', () => {
      expect(config).to.include({
        makeIPTablesUtilChains: false,
        protectKernelDefaults: false,
        podLogsDir: '/n/pod-logs',
        volumePluginDir: '/n/volume-plugins',
        staticPodPath: '',
      });
    });

    it('authenticates only client certificates of the cluster CA and reports status every second', () => {
      expect(config.authentication).to.deep.equal({
        anonymous: { enabled: false },
        webhook: { enabled: false },
        x509: { clientCAFile: '/n/ca.crt' },
      });
      expect(config.authorization).to.deep.equal({ mode: 'AlwaysAllow' });
      expect(config).to.include({
        nodeStatusUpdateFrequency: '1s',
        imageGCHighThresholdPercent: 100,
        imageGCLowThresholdPercent: 99,
      });
      expect(config.evictionHard).to.include({ 'nodefs.available': '1%' });
    });

    it('passes the node identity, folders and labels on the command line', () => {
      const args = kubeletArgs({
        configFile: '/n/k.json',
        kubeconfig: '/n/k.kubeconfig',
        rootDir: '/n/kubelet',
        certDir: '/n/pki',
        nodeName: 'rn-a-0',
        labels: { 'example.com/a': '1', b: 'two' },
      });
      expect(args).to.include.members([
        '--config=/n/k.json',
        '--kubeconfig=/n/k.kubeconfig',
        '--root-dir=/n/kubelet',
        '--cert-dir=/n/pki',
        '--hostname-override=rn-a-0',
        '--cloud-provider=external',
        '--node-labels=example.com/a=1,b=two',
      ]);
      expect(
        kubeletArgs({ configFile: 'c', kubeconfig: 'k', rootDir: 'r', certDir: 'p', nodeName: 'n' }).some((arg) =>
          arg.startsWith('--node-labels'),
        ),
      ).to.equal(false);
    });

    it('refuses labels that would split on the command line', () => {
      expect(() => renderNodeLabels({ a: 'x,b=y' })).to.throw(RealNodeError);
      expect(() => renderNodeLabels({ 'a=b': 'x' })).to.throw(RealNodeError);
      expect(renderNodeLabels({})).to.equal('');
    });
  });
});
