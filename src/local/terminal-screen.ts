import type { ScreenSize } from './live-view.js';

/** What the screen needs of a terminal's output stream (process.stdout; a fake in tests). */
export interface TerminalOutput {
  write(text: string): unknown;
  readonly columns?: number | undefined;
  readonly rows?: number | undefined;
  on(event: 'resize', listener: () => void): unknown;
  off(event: 'resize', listener: () => void): unknown;
}

const ESC = '\u001b[';
/** xterm's alternate screen (1049 also saves and restores the cursor), then hide the cursor. */
export const ENTER_ALTERNATE_SCREEN = `${ESC}?1049h${ESC}?25l${ESC}H${ESC}2J`;
/** Show the cursor, back to the normal screen with what was on it before. */
export const LEAVE_ALTERNATE_SCREEN = `${ESC}?25h${ESC}?1049l`;
// Synchronized output (DEC mode 2026): the terminal shows the frame at once instead of row by row;
// terminals without it ignore the sequence.
const BEGIN_FRAME = `${ESC}?2026h`;
const END_FRAME = `${ESC}?2026l`;

/** A size for terminals that do not report one (80x24 is what they assume too). */
const FALLBACK: ScreenSize = { columns: 80, rows: 24 };

/**
 * The live view's terminal: the alternate screen while it runs, so the lines printed before it
 * (the export line, the demo's progress) are back untouched when it ends. Each frame positions
 * every row absolutely and clears it first: no row can wrap into the next or leave old text behind.
 * `leave` is idempotent and synchronous, so it is safe from signal and exit handlers.
 */
export class AlternateScreen {
  private active = false;
  private resizeListener: (() => void) | undefined;

  constructor(private readonly output: TerminalOutput) {}

  get isActive(): boolean {
    return this.active;
  }

  size(): ScreenSize {
    const { columns, rows } = this.output;
    return {
      columns: columns !== undefined && columns > 0 ? columns : FALLBACK.columns,
      rows: rows !== undefined && rows > 0 ? rows : FALLBACK.rows,
    };
  }

  /** Enters the alternate screen; `onResize` is called when the terminal changes size. */
  enter(onResize: () => void): void {
    if (this.active) return;
    this.active = true;
    this.resizeListener = onResize;
    this.output.on('resize', onResize);
    this.output.write(ENTER_ALTERNATE_SCREEN);
  }

  draw(lines: readonly string[]): void {
    if (!this.active) return;
    const rows = lines.map((line, index) => `${ESC}${index + 1};1H${ESC}2K${line}`).join('');
    // Everything below the frame is cleared, so a shorter frame leaves nothing of the last one. Not
    // after a full frame: the cursor cannot go below the last row, and ED there would erase it.
    const below = lines.length < this.size().rows ? `${ESC}${lines.length + 1};1H${ESC}J` : '';
    this.output.write(`${BEGIN_FRAME}${rows}${below}${END_FRAME}`);
  }

  leave(): void {
    if (!this.active) return;
    this.active = false;
    if (this.resizeListener !== undefined) this.output.off('resize', this.resizeListener);
    this.resizeListener = undefined;
    this.output.write(LEAVE_ALTERNATE_SCREEN);
  }
}
