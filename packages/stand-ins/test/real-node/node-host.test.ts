import { execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { cgroupTree, parseCgroupMounts, removeCgroupTreeOnce } from '../../src/real-node/cgroup-roots.js';
import {
  NODE_IMAGES,
  ociArchitecture,
  ociImageDocuments,
  SANDBOX_IMAGE,
  TEST_IMAGE,
} from '../../src/real-node/node-image.js';
import { HOLDER_SCRIPT, KUBELET_KERNEL_SETTINGS } from '../../src/real-node/node-namespace.js';
import { descendantsAt, parseStatLine, waitForDescendant } from '../../src/real-node/process-table.js';

const MOUNTINFO = `22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw
30 22 0:27 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
31 30 0:28 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
39 30 0:36 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
41 30 0:38 / /sys/fs/cgroup/with\\040space rw,relatime - cgroup cgroup rw,pids
`;

describe('real-node host helpers', () => {
  it('finds every cgroup hierarchy, v1, named and v2, in mountinfo', () => {
    expect(parseCgroupMounts(MOUNTINFO)).to.deep.equal([
      '/sys/fs/cgroup/cpu',
      '/sys/fs/cgroup/systemd',
      '/sys/fs/cgroup/unified',
      '/sys/fs/cgroup/with space',
    ]);
  });

  it('lists a cgroup tree deepest first and removes it bottom-up with rmdir', () => {
    const base = mkdtempSync(join(tmpdir(), 'cgroup-tree-'));
    try {
      const hierarchies = [join(base, 'cpu'), join(base, 'memory')];
      for (const hierarchy of hierarchies) mkdirSync(join(hierarchy, 'root', 'kubepods', 'pod1'), { recursive: true });
      const tree = cgroupTree('/root', hierarchies);
      expect(tree.indexOf(join(base, 'cpu', 'root', 'kubepods', 'pod1'))).to.be.lessThan(
        tree.indexOf(join(base, 'cpu', 'root')),
      );
      expect(tree).to.have.length(6);
      // A file stands in for a process: rmdir fails on that folder, and on its parents.
      writeFileSync(join(base, 'memory', 'root', 'kubepods', 'pod1', 'busy'), '');
      expect(removeCgroupTreeOnce('/root', hierarchies)).to.deep.equal([
        join(base, 'memory', 'root', 'kubepods', 'pod1'),
        join(base, 'memory', 'root', 'kubepods'),
        join(base, 'memory', 'root'),
      ]);
      expect(existsSync(join(base, 'cpu', 'root'))).to.equal(false);
      rmSync(join(base, 'memory', 'root', 'kubepods', 'pod1', 'busy'));
      expect(removeCgroupTreeOnce('/root', hierarchies)).to.deep.equal([]);
      expect(cgroupTree('/root', hierarchies)).to.deep.equal([]);
    } finally {
      rmSync(base, { recursive: true, force: true });
    }
  });

  it('reads name, state and parent from a stat line whose name holds spaces and parentheses', () => {
    expect(parseStatLine('1234 (a) (b c) S 42 1234 1234 0 -1 4194560')).to.deep.equal({
      comm: 'a) (b c',
      state: 'S',
      ppid: 42,
    });
    expect(parseStatLine('garbage')).to.equal(undefined);
  });

  it('finds the descendants of a process by generation and name', async () => {
    // This process → bash → sh → sleep: the sleep is two generations below bash.
    const child = spawn('bash', ['-c', 'sh -c "sleep 30; true" & sleep 30 & wait'], {
      stdio: 'ignore',
      detached: true,
    });
    try {
      const bash = child.pid ?? -1;
      const sleep = await waitForDescendant(bash, 2, 'sleep', 5000);
      expect(sleep).to.be.a('number');
      expect(descendantsAt(bash, 2)).to.deep.equal([sleep]);
      expect(descendantsAt(process.pid, 1)).to.include(bash);
      expect(await waitForDescendant(bash, 2, 'no-such-program', 50)).to.equal(undefined);
    } finally {
      // The whole group: sh and both sleeps too.
      if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
    }
  });

  it("writes kubelet's expected kernel settings and a holder script bash accepts", () => {
    expect(KUBELET_KERNEL_SETTINGS).to.deep.equal({
      'vm/overcommit_memory': 1,
      'vm/panic_on_oom': 0,
      'kernel/panic': 10,
      'kernel/panic_on_oops': 1,
      'kernel/keys/root_maxkeys': 1_000_000,
      'kernel/keys/root_maxbytes': 25_000_000,
    });
    execFileSync('bash', ['-n', '-c', HOLDER_SCRIPT]);
  });

  describe('node images', () => {
    const layer = { digest: `sha256:${'a'.repeat(64)}`, size: 1234 };
    const { index, blobs } = ociImageDocuments(layer, NODE_IMAGES, 'amd64');
    const byDigest = new Map(
      blobs.map((blob) => [blob.digest, JSON.parse(blob.bytes.toString()) as Record<string, unknown>]),
    );

    it('names every manifest in the index with the annotation ctr import tags images by', () => {
      const manifests = (
        index as { manifests: { digest: string; size: number; annotations: Record<string, string> }[] }
      ).manifests;
      expect(manifests.map((manifest) => manifest.annotations['io.containerd.image.name'])).to.deep.equal([
        SANDBOX_IMAGE,
        TEST_IMAGE,
      ]);
      for (const manifest of manifests) {
        const blob = blobs.find((candidate) => candidate.digest === manifest.digest);
        expect(blob?.bytes.length).to.equal(manifest.size);
      }
    });

    it('addresses every blob by the sha256 of its bytes, and shares the one uncompressed layer', () => {
      for (const blob of blobs)
        expect(blob.digest).to.equal(`sha256:${createHash('sha256').update(blob.bytes).digest('hex')}`);
      const manifests = [...byDigest.values()].filter((document) => document.schemaVersion === 2);
      expect(manifests).to.have.length(2);
      for (const manifest of manifests) {
        expect(manifest.layers).to.deep.equal([
          { mediaType: 'application/vnd.oci.image.layer.v1.tar', digest: layer.digest, size: layer.size },
        ]);
        const config = byDigest.get((manifest.config as { digest: string }).digest);
        expect(config?.rootfs).to.deep.equal({ type: 'layers', diff_ids: [layer.digest] });
        expect(config).to.include({ architecture: 'amd64', os: 'linux' });
      }
    });

    it('gives the sandbox image an entrypoint that keeps running', () => {
      const configs = [...byDigest.values()].filter((document) => document.rootfs !== undefined);
      const entrypoints = configs.map((config) => (config.config as { Entrypoint?: string[] }).Entrypoint);
      expect(entrypoints).to.deep.include(['/bin/sleep', '2147483647']);
      expect(ociArchitecture('x64')).to.equal('amd64');
      expect(ociArchitecture('arm64')).to.equal('arm64');
    });
  });
});
