/**
 * docs/configuration.md's settings table is generated from SETTINGS (tools/docs/configuration-doc.ts);
 * this keeps the committed table in step with the code, and pins the row format.
 */
import { readFileSync } from 'node:fs';
import { expect } from 'chai';
import {
  BEGIN_MARKER,
  CONFIGURATION_DOC,
  END_MARKER,
  WRITE_COMMAND,
  extractSettingsBlock,
  renderConfigurationTable,
  renderedSettingsTable,
  replaceSettingsBlock,
} from '../../../tools/docs/configuration-doc.js';

describe('docs/configuration.md settings table', () => {
  it(`equals the table rendered from SETTINGS (else run: ${WRITE_COMMAND})`, () => {
    const block = extractSettingsBlock(readFileSync(CONFIGURATION_DOC, 'utf8'));
    expect(block, `docs/configuration.md lacks ${BEGIN_MARKER} … ${END_MARKER}`).to.be.a('string');
    expect(block, `docs/configuration.md's settings table is out of date: run ${WRITE_COMMAND}`).to.equal(
      renderedSettingsTable(),
    );
  });

  describe('renderConfigurationTable', () => {
    const table = (settings: Parameters<typeof renderConfigurationTable>[0]) =>
      renderConfigurationTable(settings).split('\n');

    it('writes a header, then one row per setting: variable, flag, default, meaning', () => {
      expect(
        table([
          { env: 'LOG_LEVEL', flag: 'log-level', defaultValue: 'info', description: 'log level of the JSON logs' },
        ]),
      ).to.deep.equal([
        '| variable | flag | default | meaning |',
        '| --- | --- | --- | --- |',
        '| `LOG_LEVEL` | `--log-level` | `info` | log level of the JSON logs |',
      ]);
    });

    it('says unset for no default and empty for an empty one, rather than an empty code span', () => {
      const rows = table([
        { env: 'POD_NAME', flag: 'pod-name', defaultValue: undefined, description: 'd' },
        { env: 'CERT_HOSTS', flag: 'cert-hosts', defaultValue: '', description: 'd' },
      ]);
      expect(rows.slice(2)).to.deep.equal([
        '| `POD_NAME` | `--pod-name` | unset | d |',
        '| `CERT_HOSTS` | `--cert-hosts` | empty | d |',
      ]);
    });

    it('names the aliases read for a variable in its cell', () => {
      const [row] = table([
        {
          env: 'NODELOCK_EXPIRE',
          aliases: ['HAMI_NODELOCK_EXPIRE', 'OLD'],
          flag: 'nodelock-expire',
          defaultValue: '5m',
          description: 'd',
        },
      ]).slice(2);
      expect(row).to.equal(
        '| `NODELOCK_EXPIRE` (also `HAMI_NODELOCK_EXPIRE`, `OLD`) | `--nodelock-expire` | `5m` | d |',
      );
    });
  });

  describe('the block between the markers', () => {
    const doc = `intro\n${BEGIN_MARKER}\nold table\n${END_MARKER}\nafter\n`;

    it('is replaced whole, leaving the text around it', () => {
      const replaced = replaceSettingsBlock(doc, 'new table');
      expect(replaced).to.equal(`intro\n${BEGIN_MARKER}\nnew table\n${END_MARKER}\nafter\n`);
      expect(extractSettingsBlock(replaced)).to.equal('new table');
    });

    it('cannot be replaced when a marker is missing', () => {
      expect(extractSettingsBlock('no markers')).to.equal(undefined);
      expect(() => replaceSettingsBlock(`intro\n${BEGIN_MARKER}\n`, 't')).to.throw(/lacks/);
    });
  });
});
