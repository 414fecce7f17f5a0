import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { removeCgroupRootSync } from '../../src/real-node/cgroup-roots.js';
import {
  currentProcessOwner,
  describeSweep,
  isOwnerAlive,
  judgeOwner,
  OWNER_FILE,
  parseMountPoints,
  parseOwner,
  parseStatStart,
  RunFolderOwnerError,
  sweepLeftoverRunFolders,
  writeOwner,
  type RunFolderOwner,
  type SweepOptions,
} from '../../src/real-node/run-folder-owner.js';

// Fields 3 to 22 after the name; 987654 is the start time (field 22).
const STAT_TAIL = 'S 1 4321 4321 0 -1 4194304 100 0 0 0 1 2 0 0 20 0 1 0 987654 12345678 67 18446744073709551615';

/** A pid that no process has: a child that has exited and been reaped. */
function deadPid(): number {
  const pid = spawnSync('true').pid;
  if (pid === 0) throw new Error('could not spawn true');
  return pid;
}

describe('run folder owner', () => {
  describe('parsing', () => {
    it('reads the start time after the last ")" of a stat line whose name holds spaces and parentheses', () => {
      expect(parseStatStart(`4321 (a) b (c) ${STAT_TAIL}\n`)).to.deep.equal({ state: 'S', startTime: 987654 });
      expect(parseStatStart(`4321 (plain) ${STAT_TAIL}`)).to.deep.equal({ state: 'S', startTime: 987654 });
      expect(parseStatStart('4321 (a) b (c) S 1 2 3')).to.equal(undefined);
      expect(parseStatStart(`4321 no parentheses ${STAT_TAIL}`)).to.equal(undefined);
      expect(parseStatStart('garbage')).to.equal(undefined);
    });

    it("reads this process's own start time from /proc", () => {
      const owner = currentProcessOwner();
      const stat = parseStatStart(readFileSync(`/proc/${process.pid}/stat`, 'utf8'));
      expect(owner.pid).to.equal(process.pid);
      expect(owner.startTime).to.equal(stat?.startTime).and.to.be.greaterThan(0);
      expect(owner.pidNamespace).to.match(/^pid:\[\d+\]$/);
    });

    it('reads back what it writes, and nothing else', () => {
      const dir = mkdtempSync(join(tmpdir(), 'run-owner-'));
      try {
        const owner: RunFolderOwner = { pid: 1234, startTime: 5678, pidNamespace: 'pid:[4026531836]' };
        writeOwner(dir, owner);
        expect(parseOwner(readFileSync(join(dir, OWNER_FILE), 'utf8'))).to.deep.equal(owner);
        expect(() => {
          writeOwner(join(dir, 'missing'), owner);
        })
          .to.throw(RunFolderOwnerError)
          .with.property('cause')
          .that.has.property('code', 'ENOENT');
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
      expect(parseOwner('{"pid":12,"startTime":34}')).to.deep.equal({ pid: 12, startTime: 34 });
      for (const text of [
        '',
        '{"pid":12,"startT',
        'null',
        '[]',
        '{"pid":0,"startTime":1}',
        '{"pid":-1,"startTime":1}',
        '{"pid":1.5,"startTime":1}',
        '{"pid":"12","startTime":1}',
        '{"pid":12}',
        '{"pid":12,"startTime":1,"pidNamespace":3}',
      ]) {
        expect(parseOwner(text), text).to.equal(undefined);
      }
    });

    it('reads mount points with their escapes undone', () => {
      expect(
        parseMountPoints(
          '22 1 254:0 / / rw - ext4 /dev/vda rw\n41 30 0:38 / /tmp/with\\040space rw - tmpfs tmpfs rw\n',
        ),
      ).to.deep.equal(['/', '/tmp/with space']);
    });
  });

  describe('judging an owner', () => {
    const alive = () => true;
    const dead = () => false;

    it('is gone only when the owner file names a process that is known to be gone', () => {
      expect(judgeOwner('{"pid":12,"startTime":34}', dead, undefined)).to.deep.equal({
        gone: true,
        owner: { pid: 12, startTime: 34 },
      });
      expect(judgeOwner('{"pid":12,"startTime":34}', alive, undefined)).to.deep.equal({
        gone: false,
        reason: 'owner pid 12 is alive',
      });
      expect(judgeOwner(undefined, dead, undefined)).to.deep.equal({ gone: false, reason: 'no owner file' });
      expect(judgeOwner('{"pid":12', dead, undefined)).to.deep.equal({ gone: false, reason: 'owner file unreadable' });
    });

    it('does not judge an owner of another pid namespace, where its pid means another process', () => {
      const text = '{"pid":12,"startTime":34,"pidNamespace":"pid:[1]"}';
      expect(judgeOwner(text, dead, 'pid:[2]').gone).to.equal(false);
      expect(judgeOwner(text, dead, 'pid:[1]').gone).to.equal(true);
      expect(judgeOwner(text, dead, undefined).gone).to.equal(true);
    });

    it('tells from /proc whether the process runs and started at that time', () => {
      const self = currentProcessOwner();
      expect(isOwnerAlive(self.pid, self.startTime)).to.equal(true);
      expect(isOwnerAlive(self.pid, self.startTime + 1)).to.equal(false);
      expect(isOwnerAlive(deadPid(), self.startTime)).to.equal(false);
    });

    it('counts a zombie as gone and an unparsable stat line as alive', () => {
      const proc = mkdtempSync(join(tmpdir(), 'fake-proc-'));
      try {
        mkdirSync(join(proc, '7'));
        writeFileSync(join(proc, '7', 'stat'), `7 (x) ${STAT_TAIL.replace(/^S/, 'Z')}`);
        mkdirSync(join(proc, '8'));
        writeFileSync(join(proc, '8', 'stat'), 'truncated');
        mkdirSync(join(proc, '9'));
        writeFileSync(join(proc, '9', 'stat'), `9 (a) b (c) ${STAT_TAIL}`);
        expect(isOwnerAlive(7, 987654, proc)).to.equal(false);
        expect(isOwnerAlive(8, 987654, proc)).to.equal(true);
        expect(isOwnerAlive(9, 987654, proc)).to.equal(true);
        expect(isOwnerAlive(9, 987655, proc)).to.equal(false);
        expect(isOwnerAlive(10, 987654, proc)).to.equal(false);
      } finally {
        rmSync(proc, { recursive: true, force: true });
      }
    });
  });

  describe('sweeping leftover run folders', () => {
    let base: string;
    let baseDir: string;
    let hierarchies: string[];
    const self = () => currentProcessOwner();

    beforeEach(() => {
      base = mkdtempSync(join(tmpdir(), 'run-sweep-'));
      baseDir = join(base, 'tmp');
      // Ordinary folders stand in for cgroup hierarchies: rmdir works on them the same way.
      hierarchies = [join(base, 'cpu'), join(base, 'unified')];
      for (const folder of [baseDir, ...hierarchies]) mkdirSync(folder, { recursive: true });
    });
    afterEach(() => {
      rmSync(base, { recursive: true, force: true });
    });

    /** A run folder with node folders (and their cgroups in every hierarchy), owned by `owner`. */
    const runFolder = (suffix: string, owner: RunFolderOwner | undefined, nodes: string[]) => {
      const dir = join(baseDir, `vgpu-warden-rn-${suffix}`);
      for (const node of nodes) {
        mkdirSync(join(dir, node, 'kubelet'), { recursive: true });
        writeFileSync(join(dir, node, 'kubelet.log'), 'log');
        for (const hierarchy of hierarchies)
          mkdirSync(join(hierarchy, `vgpu-warden-${node}`, 'kubepods', 'besteffort'), { recursive: true });
      }
      mkdirSync(dir, { recursive: true });
      writeFileSync(join(dir, 'node-images.oci.tar'), 'tar');
      if (owner !== undefined) writeOwner(dir, owner);
      return dir;
    };
    const cgroup = (hierarchy: number, node: string) => join(hierarchies[hierarchy] ?? '', `vgpu-warden-${node}`);
    const sweep = (extra: Partial<SweepOptions> = {}) =>
      sweepLeftoverRunFolders({
        baseDir,
        hierarchies,
        removeCgroupRoot: (root, all) => {
          removeCgroupRootSync(root, all, 0);
        },
        mountPoints: () => [],
        ...extra,
      });

    it("removes a folder owned by a dead pid with its nodes' cgroups, and keeps one owned by this process", () => {
      const dead = runFolder('dead00', { pid: deadPid(), startTime: self().startTime }, ['rn-0', 'rn-1']);
      const live = runFolder('live00', self(), ['rn-2']);
      const report = sweep();
      expect(report.removed).to.deep.equal([dead]);
      expect(report.kept).to.deep.equal([{ dir: live, kind: 'owner', reason: `owner pid ${process.pid} is alive` }]);
      expect(existsSync(dead)).to.equal(false);
      for (const node of ['rn-0', 'rn-1'])
        for (const hierarchy of [0, 1]) expect(existsSync(cgroup(hierarchy, node))).to.equal(false);
      expect(existsSync(join(live, 'rn-2', 'kubelet.log'))).to.equal(true);
      expect(existsSync(cgroup(0, 'rn-2'))).to.equal(true);
      expect(describeSweep(report)).to.equal(`removed 1 leftover run folder(s) of gone runs: ${dead}`);
    });

    it('removes a folder whose pid is alive but started at another time (a reused pid)', () => {
      const reused = runFolder('reuse0', { pid: process.pid, startTime: self().startTime + 1 }, ['rn-0']);
      expect(sweep().removed).to.deep.equal([reused]);
      expect(existsSync(reused)).to.equal(false);
      expect(existsSync(cgroup(1, 'rn-0'))).to.equal(false);
    });

    it('keeps folders without an owner file or with an unreadable one, and what is not a run folder', () => {
      const unowned = runFolder('nobody', undefined, ['rn-0']);
      const garbled = runFolder('garble', undefined, ['rn-1']);
      writeFileSync(join(garbled, OWNER_FILE), '{"pid":');
      const other = join(baseDir, 'something-else');
      mkdirSync(other);
      writeOwner(other, { pid: deadPid(), startTime: 1 });
      const target = runFolder('target', { pid: deadPid(), startTime: 1 }, []);
      symlinkSync(target, join(baseDir, 'vgpu-warden-rn-link00'));
      writeFileSync(join(baseDir, 'vgpu-warden-rn-file00'), '');
      const report = sweep({ isAlive: () => false });
      expect(report.removed).to.deep.equal([target]);
      expect(report.kept).to.have.deep.members([
        { dir: unowned, kind: 'owner', reason: 'no owner file' },
        { dir: garbled, kind: 'owner', reason: 'owner file unreadable' },
      ]);
      for (const kept of [unowned, garbled, other]) expect(existsSync(kept)).to.equal(true);
      expect(existsSync(cgroup(0, 'rn-0'))).to.equal(true);
      expect(existsSync(cgroup(0, 'rn-1'))).to.equal(true);
      expect(describeSweep({ removed: [], kept: report.kept })).to.equal(undefined);
    });

    it('keeps and reports a folder whose cgroups cannot be removed, and still sweeps the others', () => {
      const busy = runFolder('busy00', { pid: deadPid(), startTime: 1 }, ['rn-0', 'rn-1']);
      const idle = runFolder('idle00', { pid: deadPid(), startTime: 1 }, ['rn-2']);
      // A file stands in for a process: rmdir fails on its folder and on every parent.
      writeFileSync(join(cgroup(1, 'rn-1'), 'kubepods', 'busy'), '');
      const report = sweep();
      expect(report.removed).to.deep.equal([idle]);
      expect(report.kept).to.have.length(1);
      const [kept] = report.kept;
      expect(kept?.dir).to.equal(busy);
      expect(kept?.kind).to.equal('failed');
      expect(kept?.reason)
        .to.include(join(cgroup(1, 'rn-1'), 'kubepods'))
        .and.to.include(cgroup(1, 'rn-1'));
      expect(existsSync(join(busy, OWNER_FILE))).to.equal(true);
      expect(existsSync(cgroup(0, 'rn-0'))).to.equal(false);
      expect(describeSweep(report))
        .to.include(`removed 1 leftover run folder(s) of gone runs: ${idle}`)
        .and.to.include(`kept 1 of gone runs: ${busy} (cgroups still present`);
      // Once the process is gone, the next sweep takes the rest.
      rmSync(join(cgroup(1, 'rn-1'), 'kubepods', 'busy'));
      expect(sweep().removed).to.deep.equal([busy]);
      expect(existsSync(cgroup(1, 'rn-1'))).to.equal(false);
    });

    it('does not let a failing cgroup removal stop the sweep', () => {
      const dir = runFolder('throws', { pid: deadPid(), startTime: 1 }, ['rn-0']);
      const report = sweep({
        removeCgroupRoot: () => {
          throw new Error('EPERM');
        },
      });
      expect(report.removed).to.deep.equal([]);
      expect(report.kept).to.deep.equal([{ dir, kind: 'failed', reason: '/vgpu-warden-rn-0: EPERM' }]);
      expect(existsSync(dir)).to.equal(true);
    });

    it('leaves the cgroups of a node name that a kept run folder also has', () => {
      const dead = runFolder('dead00', { pid: deadPid(), startTime: 1 }, ['rn-0', 'rn-1']);
      runFolder('live00', self(), ['rn-1']);
      expect(sweep().removed).to.deep.equal([dead]);
      expect(existsSync(cgroup(0, 'rn-0'))).to.equal(false);
      expect(existsSync(join(cgroup(0, 'rn-1'), 'kubepods', 'besteffort'))).to.equal(true);
    });

    it('keeps a folder with a mount inside, which rm -r would go through', () => {
      const dir = runFolder('mount0', { pid: deadPid(), startTime: 1 }, ['rn-0']);
      const report = sweep({ mountPoints: () => [join(dir, 'rn-0', 'kubelet')] });
      expect(report.kept).to.deep.equal([
        { dir, kind: 'failed', reason: `mounts inside: ${join(dir, 'rn-0', 'kubelet')}` },
      ]);
      expect(existsSync(dir)).to.equal(true);
      expect(existsSync(cgroup(0, 'rn-0'))).to.equal(true);
    });

    it('keeps a folder whose owner ran in another pid namespace', () => {
      const dir = runFolder('ns0000', { pid: deadPid(), startTime: 1, pidNamespace: 'pid:[1]' }, []);
      expect(sweep({ pidNamespace: 'pid:[2]' }).kept.map((kept) => kept.dir)).to.deep.equal([dir]);
      expect(sweep({ pidNamespace: 'pid:[1]' }).removed).to.deep.equal([dir]);
    });

    it('finds nothing to do in a base folder that does not exist', () => {
      expect(sweep({ baseDir: join(base, 'missing') })).to.deep.equal({ removed: [], kept: [] });
    });
  });
});
