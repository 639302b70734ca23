// The Memory panel: search as you type (the ranking of %recall, with why each matched), every
// memory newest first without a query, filters, actions on each memory, the session timeline,
// the counts and the learning phase; it reads again when the memory changes (a cheap poll).
import { Clipboard, Notification } from '@jupyterlab/apputils';
import { Message } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';

import {
  IDetail,
  IFacets,
  IListing,
  IMemory,
  ISession,
  IStatus,
  post,
  query,
  request
} from './api';

const PAGE = 30;
const TYPING_MS = 180;

export interface IPanelOptions {
  /** Open a notebook at a cell (by the stable cell id, else the cell number). */
  openCell: (path: string, cellId: string | null, cell: number | null) => Promise<boolean>;
}

function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  cls = '',
  text = ''
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (cls) {
    node.className = cls;
  }
  if (text) {
    node.textContent = text;
  }
  return node;
}

function button(label: string, title: string, cls = ''): HTMLButtonElement {
  const b = el('button', `slm-lab-button ${cls}`.trim(), label);
  b.type = 'button';
  b.title = title;
  b.setAttribute('aria-label', title);
  return b;
}

function when(iso: string): string {
  const d = new Date(iso.endsWith('Z') || iso.includes('+') ? iso : `${iso}Z`);
  return isNaN(d.getTime()) ? iso : d.toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' });
}

/** Who wrote a memory that has no notebook, in words. */
function writer(m: IMemory): string {
  if (m.source === 'mcp') {
    return 'written by the assistant';
  }
  if (m.kind === 'summary_event') {
    return 'a session’s summary';
  }
  return m.session_id?.startsWith('cli:') ? 'written with slm-magic in a terminal' : 'written outside a notebook';
}

/** A text on one line, cut to `n` characters with an ellipsis (a toast, a confirmation). */
export function short(text: string, n: number): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length <= n ? flat : `${flat.slice(0, n - 1).trimEnd()}…`;
}

function basename(path: string): string {
  return path.split(/[\\/]/).pop() || path;
}

function select(cls: string, label: string): HTMLSelectElement {
  const s = el('select', `slm-lab-filter ${cls}`);
  s.title = label;
  s.setAttribute('aria-label', label);
  return s;
}

function fill(s: HTMLSelectElement, all: string, values: string[]): void {
  const current = s.value;
  s.textContent = '';
  const none = el('option', '', all);
  none.value = '';
  s.appendChild(none);
  for (const v of values) {
    const o = el('option', '', v);
    o.value = v;
    s.appendChild(o);
  }
  s.value = values.includes(current) ? current : '';
}

/** `content` into `node`, the question's words it matched marked (why it is here, in place). */
function marked(node: HTMLElement, content: string, words: string[]): void {
  const escaped = words.filter(w => w.length > 1).map(w => w.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));
  if (!escaped.length) {
    node.appendChild(document.createTextNode(content));
    return;
  }
  const pattern = new RegExp(`(?<![\\p{L}\\p{N}])(?:${escaped.join('|')})[\\p{L}\\p{N}_]*`, 'giu');
  let last = 0;
  for (const hit of content.matchAll(pattern)) {
    const at = hit.index ?? 0;
    node.appendChild(document.createTextNode(content.slice(last, at)));
    node.appendChild(el('mark', 'slm-lab-hit', hit[0]));
    last = at + hit[0].length;
  }
  node.appendChild(document.createTextNode(content.slice(last)));
}

export class MemoryPanel extends Widget {
  constructor(private options: IPanelOptions) {
    super();
    this.id = 'slm-memory-panel';
    this.addClass('slm-lab');
    this.title.caption = 'Memory';
    this.build();
  }

  // --- the DOM ---------------------------------------------------------------------------------
  private head = el('div', 'slm-lab-counts');
  private search = el('input', 'slm-lab-search');
  private project = select('slm-lab-f-project', 'project');
  private type = select('slm-lab-f-type', 'type');
  private tag = select('slm-lab-f-tag', 'tag');
  private author = select('slm-lab-f-author', 'author');
  private since = el('input', 'slm-lab-filter slm-lab-since');
  private until = el('input', 'slm-lab-filter slm-lab-until');
  private info = el('div', 'slm-lab-info');
  private clear = button('clear filters', 'show memories of every project, type, tag, day and author', 'slm-lab-clear');
  private list = el('ul', 'slm-lab-list');
  private more = button('more', 'show the next memories', 'slm-lab-more');
  private sessions = el('div', 'slm-lab-sessions');
  private memoriesView = el('div', 'slm-lab-view slm-lab-memories');
  private tabs: HTMLButtonElement[] = [];

  private items: IMemory[] = [];
  private total = 0;
  private stamp = '';
  private generation = 0;
  private typing = 0;
  private poller = 0;
  private pollMs = 3000;
  private view: 'memories' | 'sessions' = 'memories';

  private build(): void {
    const root = this.node;
    root.appendChild(this.head);
    this.head.setAttribute('aria-live', 'polite');
    const tabs = el('div', 'slm-lab-tabs');
    tabs.setAttribute('role', 'tablist');
    for (const name of ['memories', 'sessions'] as const) {
      const t = button(name === 'memories' ? 'Memories' : 'Sessions', `show the ${name}`, `slm-lab-tab slm-lab-tab-${name}`);
      t.setAttribute('role', 'tab');
      t.onclick = () => this.showView(name);
      this.tabs.push(t);
      tabs.appendChild(t);
    }
    root.appendChild(tabs);

    this.search.type = 'search';
    this.search.placeholder = 'Search memories (as %recall)';
    this.search.setAttribute('aria-label', 'search memories');
    this.search.oninput = () => {
      window.clearTimeout(this.typing);
      this.typing = window.setTimeout(() => void this.reload(), TYPING_MS);
    };
    this.search.onkeydown = e => {
      if (e.key === 'ArrowDown') {
        e.preventDefault();
        this.focusItem(0);
      } else if (e.key === 'Enter') {
        window.clearTimeout(this.typing);
        void this.reload();
      }
    };
    const filters = el('div', 'slm-lab-filters');
    for (const [input, label] of [[this.since, 'written on or after'], [this.until, 'written on or before']] as const) {
      input.type = 'date';
      input.title = label;
      input.setAttribute('aria-label', label);
    }
    for (const f of [this.project, this.type, this.tag, this.author]) {
      f.onchange = () => void this.reload();
      filters.appendChild(f);
    }
    for (const [input, words] of [[this.since, 'from'], [this.until, 'to']] as const) {
      input.onchange = () => void this.reload();
      const label = el('label', 'slm-lab-date-filter', words);
      label.appendChild(input);
      filters.appendChild(label);
    }
    this.clear.onclick = () => {
      for (const f of [this.project, this.type, this.tag, this.author, this.since, this.until]) {
        f.value = '';
      }
      void this.reload();
    };
    filters.appendChild(this.clear);
    this.author.style.display = 'none';
    this.list.setAttribute('role', 'listbox');
    this.list.setAttribute('aria-label', 'memories');
    this.list.onkeydown = e => this.onListKey(e);
    this.more.onclick = () => void this.page();
    this.memoriesView.append(this.search, filters, this.info, this.list, this.more);
    root.append(this.memoriesView, this.sessions);
    this.sessions.classList.add('slm-lab-view');
    this.showView('memories');
  }

  private showView(view: 'memories' | 'sessions'): void {
    this.view = view;
    this.memoriesView.hidden = view !== 'memories';
    this.sessions.hidden = view !== 'sessions';
    this.tabs.forEach((t, i) => {
      const on = (i === 0) === (view === 'memories');
      t.classList.toggle('slm-lab-tab-on', on);
      t.setAttribute('aria-selected', String(on));
    });
    if (view === 'sessions') {
      void this.loadSessions();
    }
  }

  // --- reading ---------------------------------------------------------------------------------
  /** Read the memory the first time the panel is shown (a closed panel asks nothing). */
  protected onAfterShow(msg: Message): void {
    super.onAfterShow(msg);
    if (!this.started) {
      this.started = true;
      void this.start();
    } else {
      void this.poll();
    }
  }

  private started = false;

  async start(): Promise<void> {
    try {
      const config = await request<{ poll_ms: number }>('config');
      this.pollMs = Math.max(500, config.poll_ms || 3000);
    } catch {
      // (the defaults)
    }
    await Promise.all([this.loadStatus(), this.loadFacets(), this.reload()]);
    this.poller = window.setInterval(() => void this.poll(), this.pollMs);
  }

  dispose(): void {
    window.clearInterval(this.poller);
    super.dispose();
  }

  private params(offset: number, limit: number): string {
    return query({
      q: this.search.value.trim(),
      project: this.project.value,
      type: this.type.value,
      tag: this.tag.value,
      author: this.author.value,
      since: this.since.value,
      until: this.until.value,
      offset,
      limit
    });
  }

  /** Read the list again from the top (as many as are shown, at least a page). */
  async reload(keep = false): Promise<void> {
    const generation = ++this.generation;
    const limit = keep ? Math.max(PAGE, Math.min(200, this.items.length)) : PAGE;
    try {
      const got = await request<IListing>(`memories${this.params(0, limit)}`);
      if (generation !== this.generation) {
        return; // a newer question was asked meanwhile
      }
      const focused = this.focusedIndex();
      this.items = got.items;
      this.total = got.total;
      this.render(got);
      if (keep && focused >= 0) {
        this.focusItem(Math.min(focused, this.items.length - 1));
      }
    } catch (e) {
      if (generation === this.generation) {
        this.info.textContent = `could not read the memory: ${(e as Error).message}`;
      }
    }
  }

  private async page(): Promise<void> {
    const got = await request<IListing>(`memories${this.params(this.items.length, PAGE)}`);
    const start = this.items.length;
    this.items = this.items.concat(got.items);
    got.items.forEach((m, i) => this.list.appendChild(this.row(m, start + i)));
    this.total = got.total;
    this.updateInfo(got);
  }

  private render(got: IListing): void {
    this.list.textContent = '';
    this.items.forEach((m, i) => this.list.appendChild(this.row(m, i)));
    this.updateInfo(got);
  }

  private updateInfo(got: IListing): void {
    this.clear.hidden = ![this.project, this.type, this.tag, this.author, this.since, this.until].some(f => f.value);
    const n = this.total;
    const noun = n === 1 ? 'memory' : 'memories';
    if (got.query) {
      const ms = got.elapsed_ms !== undefined ? ` in ${got.elapsed_ms} ms` : '';
      const verb = n === 1 ? 'matches' : 'match';
      this.info.textContent = n ? `${n} ${noun} ${verb} “${got.query}”${ms}` : `nothing matches “${got.query}”`;
    } else {
      // (with a filter set, an empty page says so: the memory itself may hold many)
      const empty = this.clear.hidden ? 'no memories yet' : 'no memory matches these filters';
      this.info.textContent = n ? `${n} ${noun}, newest first` : empty;
    }
    if (this.items.length < n) {
      this.info.textContent += ` (showing ${this.items.length})`;
    }
    this.more.hidden = this.items.length >= n;
  }

  private async loadStatus(): Promise<void> {
    const st = await request<IStatus>('status');
    this.stamp = st.stamp;
    const plural = (k: number, one: string, many: string) => `${k} ${k === 1 ? one : many}`;
    this.head.textContent = '';
    const line = el('div', 'slm-lab-count-line',
      `${plural(st.memories, 'memory', 'memories')} · ${st.core} pinned · ${plural(st.sessions, 'session', 'sessions')}`);
    const learning = el('div', 'slm-lab-learning',
      `learning phase ${st.phase}: ${st.learning} (${plural(st.feedback, 'signal', 'signals')})`);
    const who = el('div', 'slm-lab-who', `${st.user} · ${basename(st.database)}`);
    who.title = st.database;
    this.head.append(line, learning, who);
  }

  private async loadFacets(): Promise<void> {
    const f = await request<IFacets>('facets');
    fill(this.project, 'any project', f.projects);
    fill(this.type, 'any type', f.types);
    fill(this.tag, 'any tag', f.tags);
    fill(this.author, 'anyone', f.authors);
    this.author.style.display = f.team ? '' : 'none';
  }

  /** Anything new (a kernel's %%remember, the assistant's remember, a forget elsewhere)? */
  private async poll(): Promise<void> {
    if (!this.isVisible) {
      return;
    }
    try {
      const { stamp } = await request<{ stamp: string }>('changes');
      if (stamp !== this.stamp) {
        this.stamp = stamp;
        await Promise.all([this.loadStatus(), this.loadFacets(), this.reload(true)]);
        if (this.view === 'sessions') {
          await this.loadSessions();
        }
      }
    } catch {
      // (the server is away: try again next time)
    }
  }

  private async changed(): Promise<void> {
    await Promise.all([this.loadStatus(), this.loadFacets(), this.reload(true)]);
  }

  // --- one memory ------------------------------------------------------------------------------
  private row(m: IMemory, index: number): HTMLLIElement {
    const li = el('li', 'slm-lab-item');
    li.tabIndex = index === 0 ? 0 : -1;
    li.setAttribute('role', 'option');
    li.dataset.id = m.fact_id;
    li.classList.toggle('slm-lab-core', m.is_core);
    const text = el('div', 'slm-lab-text');
    if (m.title) {
      text.appendChild(el('strong', 'slm-lab-title', `${m.title} `));
    }
    marked(text, m.content, (m.matched || {}).content || []);
    const fold = button('more', 'show all of it', 'slm-lab-fold');
    fold.onclick = e => {
      e.stopPropagation();
      const open = text.classList.toggle('slm-lab-open');
      fold.textContent = open ? 'less' : 'more';
    };
    li.append(text, fold);
    // ("more" only while the text is cut: looked at again whenever the panel is resized)
    const cut = () => {
      fold.hidden = text.clientHeight > 0 && !text.classList.contains('slm-lab-open') && text.scrollHeight <= text.clientHeight + 1;
    };
    requestAnimationFrame(cut);
    new ResizeObserver(cut).observe(text);
    li.appendChild(this.meta(m));
    if (m.score !== undefined) {
      li.appendChild(this.why(m));
    }
    li.appendChild(this.whereFrom(m));
    li.appendChild(this.actions(m, li));
    li.onclick = () => {
      this.setFocus(li);
    };
    li.ondblclick = () => void this.open(m);
    return li;
  }

  private meta(m: IMemory): HTMLDivElement {
    const meta = el('div', 'slm-lab-meta');
    const bits: HTMLElement[] = [];
    if (m.is_core) {
      bits.push(el('span', 'slm-lab-pinned', 'pinned'));
    }
    bits.push(el('span', 'slm-lab-type', m.type));
    if (m.project) {
      bits.push(el('span', 'slm-lab-project-name', m.project));
    }
    for (const t of m.tags) {
      const chip = el('button', 'slm-lab-tagchip', `#${t}`);
      chip.type = 'button';
      chip.title = `only memories tagged ${t}`;
      chip.onclick = e => {
        e.stopPropagation();
        if (![...this.tag.options].some(o => o.value === t)) {
          this.tag.appendChild(Object.assign(el('option', '', t), { value: t }));
        }
        this.tag.value = t;
        void this.reload();
      };
      bits.push(chip);
    }
    if (m.notebook) {
      const where = el('span', 'slm-lab-where', `${basename(m.notebook)}${m.cell !== null ? ` [${m.cell}]` : ''}`);
      where.title = m.notebook;
      bits.push(where);
    }
    const date = el('span', 'slm-lab-date', when(m.updated_at));
    date.title = `written ${when(m.created_at)}, updated ${when(m.updated_at)}`;
    bits.push(date);
    if (m.shared || !m.mine) {
      bits.push(el('span', 'slm-lab-author-name', m.mine ? 'shared by you' : `by ${m.author}`));
    }
    if (m.source === 'mcp') {
      bits.push(el('span', 'slm-lab-source', 'assistant'));
    }
    meta.append(...bits);
    return meta;
  }

  private why(m: IMemory): HTMLDivElement {
    const why = el('div', 'slm-lab-why');
    // (in the words and with the number of %recall's table: how much of the question it holds)
    const relevance = m.parts?.relevance;
    const strength = el('span', `slm-lab-strength slm-lab-${m.strength}`,
      `${m.strength_words ?? `${m.strength} match`}${relevance !== undefined ? ` ${relevance.toFixed(2)}` : ''}`);
    strength.title = 'match: how much of the question it contains, in words, word parts and meaning';
    const score = el('span', 'slm-lab-score', `score ${(m.score ?? 0).toFixed(2)}`);
    score.title = 'the search score (0.60·relevance + 0.25·recency + 0.15·revision, and the session and learned parts)';
    const bar = el('span', 'slm-lab-bar');
    for (const [name, value] of Object.entries(m.adds || {})) {
      if (value > 0) {
        const seg = el('span', `slm-lab-seg slm-lab-seg-${name}`);
        seg.style.width = `${Math.min(100, value * 100)}%`;
        seg.title = `${name} adds ${value.toFixed(3)}`;
        bar.appendChild(seg);
      }
    }
    why.append(strength, score, bar);
    if (m.reason) {
      why.appendChild(el('span', 'slm-lab-reason', m.reason));
    }
    const parts = el('details', 'slm-lab-parts');
    parts.appendChild(el('summary', '', 'score parts'));
    const table = el('div', 'slm-lab-parts-grid');
    for (const [name, value] of Object.entries(m.parts || {})) {
      const label = el('span', '', m.part_words?.[name] ?? name.replace('_', ' '));
      label.title = m.part_tips?.[name] ?? name;
      table.append(label, el('span', 'slm-lab-num', value.toFixed(3)));
    }
    parts.appendChild(table);
    parts.onclick = e => e.stopPropagation();
    why.appendChild(parts);
    return why;
  }

  /** Where it came from, read when opened: notebook, cell, its stable id, the code run before it. */
  private whereFrom(m: IMemory): HTMLDetailsElement {
    const box = el('details', 'slm-lab-from');
    box.appendChild(el('summary', '', 'where from'));
    box.onclick = e => e.stopPropagation();
    box.ontoggle = async () => {
      if (!box.open || box.dataset.loaded) {
        return;
      }
      box.dataset.loaded = '1';
      try {
        const d = await request<IDetail>(`memories/${m.fact_id}`);
        const p = d.provenance;
        const lines: string[] = [];
        lines.push(p && p.notebook ? `notebook ${p.notebook}` : `no notebook (written by ${m.source || 'the API or a terminal'})`);
        if (p && p.cell !== null) {
          lines.push(`cell [${p.cell}]`);
        }
        if (p && p.cell_id) {
          lines.push(`cell id ${p.cell_id}`);
        }
        lines.push(`session ${d.session_id || 'none'} · id ${d.fact_id}`);
        for (const line of lines) {
          box.appendChild(el('div', 'slm-lab-from-line', line));
        }
        if (p && p.code) {
          box.appendChild(el('div', 'slm-lab-from-line', 'the code it came from:'));
          box.appendChild(el('pre', 'slm-lab-code', p.code));
        }
      } catch (e) {
        box.appendChild(el('div', 'slm-lab-from-line', `could not read it: ${(e as Error).message}`));
      }
    };
    return box;
  }

  private actions(m: IMemory, li: HTMLLIElement): HTMLDivElement {
    const row = el('div', 'slm-lab-actions');
    const open = button('open', m.notebook ? `open ${basename(m.notebook)} at its cell` : `no notebook: ${writer(m)}`,
      'slm-lab-open');
    open.disabled = !m.notebook;
    open.onclick = e => {
      e.stopPropagation();
      void this.open(m);
    };
    const pin = button(m.is_core ? 'unpin' : 'pin', m.is_core ? 'unpin: an ordinary memory again' : 'pin: always in a session’s context', 'slm-lab-pin');
    pin.disabled = !m.mine;
    pin.onclick = e => {
      e.stopPropagation();
      void this.act(post(`memories/${m.fact_id}/pin`, { core: !m.is_core }), m.is_core ? 'unpinned' : 'pinned');
    };
    // (JupyterLab's icon font: a machine without an emoji font draws 👍 as an empty box)
    const up = button('', '👍 useful: rank it higher next time', 'slm-lab-up');
    const down = button('', '👎 not useful: rank it lower next time', 'slm-lab-down');
    up.appendChild(el('i', 'fa fa-thumbs-o-up'));
    down.appendChild(el('i', 'fa fa-thumbs-o-down'));
    for (const [b, signal] of [[up, 'up'], [down, 'down']] as const) {
      b.onclick = e => {
        e.stopPropagation();
        b.disabled = true;  // (the other stays: a mind may change, as in %recall's table)
        (b === up ? down : up).disabled = false;
        void this.act(post(`memories/${m.fact_id}/feedback`, { signal, query: this.search.value.trim() }),
          signal === 'up' ? 'marked useful' : 'marked not useful', false);
      };
    }
    const copy = button('copy id', `copy its id (${m.fact_id})`, 'slm-lab-copy');
    copy.onclick = e => {
      e.stopPropagation();
      Clipboard.copyToSystem(m.fact_id);
      Notification.info(`copied ${m.fact_id}`, { autoClose: 2000 });
    };
    const forget = button('forget', 'forget this memory for good', 'slm-lab-forget');
    forget.disabled = !m.mine;
    forget.onclick = e => {
      e.stopPropagation();
      this.confirmForget(m, li);
    };
    row.append(open, pin, up, down, copy, forget);
    return row;
  }

  private confirmForget(m: IMemory, li: HTMLLIElement): void {
    if (li.querySelector('.slm-lab-confirm')) {
      return;
    }
    const box = el('div', 'slm-lab-confirm');
    box.setAttribute('role', 'alertdialog');
    box.appendChild(el('span', '', 'forget for good?'));
    const keep = button('keep', 'keep it', 'slm-lab-keep');
    const yes = button('forget', 'yes, forget it for good', 'slm-lab-yes mod-warn');
    keep.onclick = e => {
      e.stopPropagation();
      box.remove();
      li.focus();
    };
    yes.onclick = e => {
      e.stopPropagation();
      void this.act(request(`memories/${m.fact_id}`, { method: 'DELETE' }), `forgot “${short(m.content, 40)}”`);
    };
    box.append(keep, yes);
    li.appendChild(box);
    keep.focus();
  }

  private async act(call: Promise<unknown>, done: string, reread = true): Promise<void> {
    try {
      await call;
      Notification.success(done, { autoClose: 3000 });
      if (reread) {
        await this.changed();
      } else {
        await this.loadStatus();
      }
    } catch (e) {
      Notification.error((e as Error).message, { autoClose: 6000 });
    }
  }

  /** Its notebook at its cell; or, when it has none, where it came from in the row. */
  private async open(m: IMemory): Promise<void> {
    const d = await request<IDetail>(`memories/${m.fact_id}`);
    const p = d.provenance;
    if (p && p.path) {
      const ok = await this.options.openCell(p.path, p.cell_id, p.cell);
      if (ok) {
        return;
      }
    }
    const li = this.list.querySelector(`[data-id="${m.fact_id}"]`);
    if (li && !li.querySelector('.slm-lab-provenance')) {
      const box = el('div', 'slm-lab-provenance');
      // (a path the server could not open: the notebook was renamed or deleted since)
      const why = p && p.path ? 'no longer there: renamed or deleted?' : 'not under this server’s folder';
      box.appendChild(el('div', '', p && p.notebook
        ? `from ${p.notebook}${p.cell !== null ? `, cell [${p.cell}]` : ''} (${why})`
        : `no notebook: ${writer(m)}`));
      if (p && p.code) {
        box.appendChild(el('pre', 'slm-lab-code', p.code));
      }
      li.appendChild(box);
    }
  }

  // --- the keyboard ----------------------------------------------------------------------------
  private rows(): HTMLLIElement[] {
    return [...this.list.querySelectorAll<HTMLLIElement>(':scope > .slm-lab-item')];
  }

  private focusedIndex(): number {
    return this.rows().findIndex(r => r === document.activeElement || r.contains(document.activeElement));
  }

  private setFocus(li: HTMLLIElement): void {
    for (const r of this.rows()) {
      r.tabIndex = r === li ? 0 : -1;
      r.classList.toggle('slm-lab-selected', r === li);
      r.setAttribute('aria-selected', String(r === li));
    }
    if (document.activeElement !== li && !li.contains(document.activeElement)) {
      li.focus();
    }
  }

  private focusItem(i: number): void {
    const rows = this.rows();
    if (rows.length && i >= 0) {
      const li = rows[Math.min(i, rows.length - 1)];
      this.setFocus(li);
      li.scrollIntoView({ block: 'nearest' });
    }
  }

  private onListKey(e: KeyboardEvent): void {
    const i = this.focusedIndex();
    const target = e.target as HTMLElement;
    if (target.tagName === 'BUTTON' || target.tagName === 'SUMMARY') {
      return; // (a button's own Enter)
    }
    if (e.key === 'ArrowDown') {
      e.preventDefault();
      this.focusItem(i + 1);
    } else if (e.key === 'ArrowUp') {
      e.preventDefault();
      if (i <= 0) {
        this.search.focus();
      } else {
        this.focusItem(i - 1);
      }
    } else if (e.key === 'Home') {
      e.preventDefault();
      this.focusItem(0);
    } else if (e.key === 'End') {
      e.preventDefault();
      this.focusItem(this.rows().length - 1);
    } else if (e.key === 'Enter' && i >= 0) {
      e.preventDefault();
      void this.open(this.items[i]);
    }
  }

  // --- the sessions ----------------------------------------------------------------------------
  private async loadSessions(): Promise<void> {
    const { sessions } = await request<{ sessions: ISession[] }>('sessions');
    this.sessions.textContent = '';
    if (!sessions.length) {
      this.sessions.appendChild(el('div', 'slm-lab-info', 'no sessions yet'));
      return;
    }
    let day = '';
    for (const s of sessions) {
      if (s.day !== day) {
        day = s.day;
        const d = new Date(`${day}T12:00:00`);
        this.sessions.appendChild(el('h3', 'slm-lab-day', d.toLocaleDateString(undefined, { weekday: 'long', year: 'numeric', month: 'long', day: 'numeric' })));
      }
      this.sessions.appendChild(this.sessionCard(s));
    }
  }

  /** A memory of the timeline, whole, under its line; its notebook opens at its cell. */
  private async sessionMemory(li: HTMLLIElement, factId: string): Promise<void> {
    const shown = li.querySelector('.slm-lab-session-memory');
    if (shown) {
      shown.remove();
      return;
    }
    const d = await request<IDetail>(`memories/${factId}`);
    const box = el('div', 'slm-lab-session-memory');
    marked(box, d.content, []);
    box.appendChild(this.meta(d));
    li.appendChild(box);
    const p = d.provenance;
    if (p && p.path) {
      await this.options.openCell(p.path, p.cell_id, p.cell);
    }
  }

  private sessionCard(s: ISession): HTMLDivElement {
    const card = el('div', 'slm-lab-session');
    card.dataset.id = s.session_id;
    const time = (iso: string) => when(iso).split(', ').pop();
    const until = s.last.slice(0, 10) === s.first.slice(0, 10) ? time(s.last) : when(s.last);
    card.appendChild(el('div', 'slm-lab-session-head',
      `${time(s.first)}–${until} · ${s.count} ${s.count === 1 ? 'memory' : 'memories'}`));
    const touched = [...s.notebooks, ...s.projects.map(p => `project ${p}`)];
    if (touched.length) {
      card.appendChild(el('div', 'slm-lab-meta', touched.join(' · ')));
    }
    if (s.summary) {
      card.appendChild(el('div', 'slm-lab-summary', s.summary));
    }
    const ul = el('ul', 'slm-lab-session-memories');
    for (const m of s.memories) {
      const li = el('li');
      const link = el('button', 'slm-lab-link', m.title);
      link.type = 'button';
      link.title = m.title;
      link.onclick = () => void this.sessionMemory(li, m.fact_id);
      li.appendChild(link);
      ul.appendChild(li);
    }
    if (s.count > s.memories.length) {
      ul.appendChild(el('li', 'slm-lab-session-more', `and ${s.count - s.memories.length} more`));
    }
    card.appendChild(ul);
    card.appendChild(el('div', 'slm-lab-session-id', s.session_id));
    return card;
  }
}
