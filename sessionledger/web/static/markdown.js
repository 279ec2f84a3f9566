// A small Markdown renderer for plans: it escapes every character of the source that HTML
// gives a meaning to before it adds any markup of its own, so the result contains only the
// tags written here. Supported: ATX headings, paragraphs, fenced code, block quotes, ordered,
// unordered and task lists (nested by indentation), pipe tables, rules, and inline code,
// bold, italic, strikethrough and http(s)/mailto links. Anything else stays as text.

const ESCAPES = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

export function escapeHtml(text) {
  return String(text).replace(/[&<>"']/g, (c) => ESCAPES[c]);
}

const HOLE = '\u0000';  // marks a stashed code span; removed from the source first

function inline(raw) {
  const stash = [];
  let text = escapeHtml(raw.replaceAll(HOLE, '\uFFFD'));
  text = text.replace(/(`+)([^`]|[^`][\s\S]*?[^`])\1(?!`)/g, (_m, _ticks, code) => {
    stash.push(`<code>${code.trim() || code}</code>`);
    return `${HOLE}${stash.length - 1}${HOLE}`;
  });
  text = text.replace(/\[([^\]\n]+)\]\(([^)\s]+)\)/g, (whole, label, href) => {
    if (!/^(https?:\/\/|mailto:)/i.test(href)) return whole;
    stash.push(`<a href="${href}" rel="noopener noreferrer" target="_blank">${label}</a>`);
    return `${HOLE}${stash.length - 1}${HOLE}`;
  });
  text = text
    .replace(/\*\*(?=\S)([\s\S]*?\S)\*\*/g, '<strong>$1</strong>')
    .replace(/(^|[^\w])__(?=\S)([\s\S]*?\S)__(?!\w)/g, '$1<strong>$2</strong>')
    .replace(/(^|[^*\w])\*(?=[^\s*])([^*]*?[^\s*])\*(?!\*)/g, '$1<em>$2</em>')
    .replace(/(^|[^\w])_(?=[^\s_])([^_]*?[^\s_])_(?!\w)/g, '$1<em>$2</em>')
    .replace(/~~(?=\S)([\s\S]*?\S)~~/g, '<del>$1</del>');
  const hole = new RegExp(`${HOLE}(\\d+)${HOLE}`, 'g');
  while (text.includes(HOLE)) text = text.replace(hole, (_m, i) => stash[Number(i)]);
  return text;
}

const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)[^`]*$/;
const HEADING = /^ {0,3}(#{1,6})(?:\s+(.*?))?(?:\s+#+)?\s*$/;
const RULE = /^ {0,3}([-*_])(?:\s*\1){2,}\s*$/;
const QUOTE = /^ {0,3}> ?(.*)$/;
const ITEM = /^(\s*)([-*+]|\d{1,9}[.)])\s+(.*)$/;
const TABLE_RULE = /^\s*\|?\s*:?-{1,}:?\s*(\|\s*:?-{1,}:?\s*)*\|?\s*$/;

const indentOf = (line) => line.replace(/\t/g, '    ').match(/^ */)[0].length;
const isBlank = (line) => line.trim() === '';

function cells(line) {
  let row = line.trim();
  if (row.startsWith('|')) row = row.slice(1);
  if (row.endsWith('|') && !row.endsWith('\\|')) row = row.slice(0, -1);
  return row.split(/(?<!\\)\|/).map((cell) => cell.trim().replaceAll('\\|', '|'));
}

function table(lines, start) {
  const head = cells(lines[start]);
  if (head.length < 2 || !TABLE_RULE.test(lines[start + 1] || '')) return null;
  let end = start + 2;
  const rows = [];
  while (end < lines.length && !isBlank(lines[end]) && lines[end].includes('|')) {
    rows.push(cells(lines[end]));
    end += 1;
  }
  const th = head.map((c) => `<th>${inline(c)}</th>`).join('');
  const body = rows.map((r) => `<tr>${head.map((_c, i) => `<td>${inline(r[i] ?? '')}</td>`).join('')}</tr>`);
  return { html: `<table><thead><tr>${th}</tr></thead><tbody>${body.join('')}</tbody></table>`, end };
}

function list(lines, start) {
  // Items at the first item's indentation; deeper lines belong to the item above them.
  const base = indentOf(lines[start]);
  const ordered = /\d/.test(lines[start].match(ITEM)[2]);
  const items = [];
  let i = start;
  while (i < lines.length) {
    const line = lines[i];
    const match = line.match(ITEM);
    if (match && indentOf(line) === base && /\d/.test(match[2]) === ordered) {
      items.push([match[3]]);
      i += 1;
    } else if (!isBlank(line) && indentOf(line) > base && items.length) {
      items[items.length - 1].push(line.slice(Math.min(indentOf(line), base + 2)));
      i += 1;
    } else if (isBlank(line) && i + 1 < lines.length && indentOf(lines[i + 1]) > base
               && items.length) {
      items[items.length - 1].push('');
      i += 1;
    } else break;
  }
  const first = ordered ? Number.parseInt(lines[start].match(ITEM)[2], 10) : 1;
  const tag = ordered ? 'ol' : 'ul';
  const startAttr = ordered && first !== 1 ? ` start="${first}"` : '';
  const html = items.map(([head, ...rest]) => {
    const task = head.match(/^\[([ xX])\]\s+(.*)$/);
    const label = task
      ? `<span class="task">${task[1] === ' ' ? '☐' : '☑'}</span> ${inline(task[2])}`
      : inline(head);
    const nested = rest.length ? blocks(rest) : '';
    return `<li>${label}${nested}</li>`;
  });
  return { html: `<${tag}${startAttr}>${html.join('')}</${tag}>`, end: i };
}

function blocks(lines) {
  const out = [];
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (isBlank(line)) { i += 1; continue; }
    const fence = line.match(FENCE);
    if (fence) {
      const closing = new RegExp(`^ {0,3}${fence[1][0]}{${fence[1].length},}\\s*$`);
      let end = i + 1;
      while (end < lines.length && !closing.test(lines[end])) end += 1;
      const lang = fence[2] ? ` class="language-${escapeHtml(fence[2])}"` : '';
      out.push(`<pre><code${lang}>${escapeHtml(lines.slice(i + 1, end).join('\n'))}</code></pre>`);
      i = end + 1;
      continue;
    }
    const heading = line.match(HEADING);
    if (heading) {
      const level = heading[1].length;
      const nested = headingBase ? ` aria-level="${Math.min(6, level + headingBase)}"` : '';
      out.push(`<h${level}${nested}>${inline(heading[2] || '')}</h${level}>`);
      i += 1;
      continue;
    }
    if (RULE.test(line)) { out.push('<hr>'); i += 1; continue; }
    if (QUOTE.test(line)) {
      const quoted = [];
      while (i < lines.length && QUOTE.test(lines[i])) quoted.push(lines[i].match(QUOTE)[1]), i += 1;
      out.push(`<blockquote>${blocks(quoted)}</blockquote>`);
      continue;
    }
    if (ITEM.test(line)) {
      const result = list(lines, i);
      out.push(result.html);
      i = result.end;
      continue;
    }
    const grid = line.includes('|') ? table(lines, i) : null;
    if (grid) { out.push(grid.html); i = grid.end; continue; }
    const para = [];
    while (i < lines.length && !isBlank(lines[i]) && !FENCE.test(lines[i])
           && !HEADING.test(lines[i]) && !QUOTE.test(lines[i])
           && !(para.length && (ITEM.test(lines[i]) || RULE.test(lines[i])))) {
      para.push(lines[i]);
      i += 1;
    }
    const html = para.map((p, n) => {
      const hard = n < para.length - 1 && / {2,}$/.test(p);
      return inline(p.trim()) + (hard ? '<br>' : '');
    }).join('\n');
    out.push(`<p>${html}</p>`);
  }
  return out.join('\n');
}

let headingBase = 0;  // of the render under way: its headings sit below a heading of this level

/** The HTML for ``source``: only this module's tags; every character of the source escaped.
 * With ``headingBase`` its headings are announced that many levels deeper (aria-level), as
 * the sections of what is under a heading of that level. */
export function renderMarkdown(source, { headingBase: base = 0 } = {}) {
  headingBase = base;
  try {
    return blocks(String(source ?? '').replace(/\r\n?/g, '\n').split('\n'));
  } finally {
    headingBase = 0;
  }
}
