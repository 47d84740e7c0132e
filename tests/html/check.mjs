// check.mjs -- the web edition read by a real browser.
//
//   node tests/html/check.mjs build/html build/html-shots
//
// Debian's Chromium (never a browser that playwright-core would download) loads every page
// of build/html/ from file:// with the network off, at 1280 px and at 375 px, and a page
// fails on: a console error or an uncaught exception; a request that fails, or any request
// that is not for a file:// URL; a link or anchor inside the book that does not resolve
// (external links are not followed); a formula left as TeX (a span pandoc could not turn
// into MathML, a MathML element with nothing drawn, a TeX control word in the text outside
// code); an image that does not load; at 375 px, a page wider than the window, apart from
// the boxes that scroll sideways on purpose (code, captured outputs, wide tables); a page
// file larger than PAGE_LIMIT bytes; at 375 px, a code box that scrolls sideways although its
// lines keep the book's width rule (94 columns, docs/writing-a-stage.md). Then
// axe-core (npm's @axe-core/playwright, pinned in package-lock.json) reads every page at
// both widths in the light and the dark colour scheme (prefers-color-scheme; which rules
// run in which reading is said at READINGS below): a page fails on a serious or critical
// violation; the others are reported, counted by impact. Two pages are read at once
// (HTML_JOBS=N changes it). The
// first screen of each chapter, appendix, the preface and the index page is saved at both
// widths in both schemes in the shots directory. The last line is "html: P passed, F
// failed"; exit status 1 if anything failed.
import { chromium } from 'playwright-core';
import { AxeBuilder } from '@axe-core/playwright';
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL, fileURLToPath } from 'node:url';

const [dirArg, shotsArg] = process.argv.slice(2);
if (!dirArg || !shotsArg) {
  console.error('usage: node check.mjs HTMLDIR SHOTSDIR');
  process.exit(2);
}
const dir = path.resolve(dirArg);
const shots = path.resolve(shotsArg);
fs.rmSync(shots, { recursive: true, force: true });
fs.mkdirSync(shots, { recursive: true });
const executablePath = process.env.CHROMIUM || '/usr/bin/chromium';
const pages = fs.readdirSync(dir).filter((f) => f.endsWith('.html')).sort();
// A page is read on a phone: none is larger than this (the companion is one page per stage).
const PAGE_LIMIT = 600 * 1000;
// The book's width rule for code: 94 columns (the PDF's chunk width).
const CODE_COLUMNS = 94;
const shotPage = (f) => /^(index|preface|stage-\d+|appendix-[a-z]|programs)\.html$/.test(f);

let passed = 0;
let failed = 0;
const check = (ok, what) => {
  if (ok) passed++;
  else { failed++; console.log('FAIL ' + what); }
};

let largest = ['', 0];
for (const file of pages) {
  const size = fs.statSync(path.join(dir, file)).size;
  if (size > largest[1]) largest = [file, size];
  check(size <= PAGE_LIMIT, `${file} is ${size} bytes, more than the limit of ${PAGE_LIMIT}`);
}
const narrow = { code: 0, codeScroll: 0, display: 0, displayScroll: 0 };

const browser = await chromium.launch({
  executablePath,
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
         '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});

const ids = new Map();     // page file -> Set of ids
const links = [];          // [from page, href]

const axeCount = { critical: 0, serious: 0, moderate: 0, minor: 0 };
const axeRules = new Map(); // "impact rule" -> { nodes, pages: Set }
const started = Date.now();

// READINGS: what axe-core runs in each reading. The page's markup is the same in all four; what the
// width changes is what is shown and what scrolls, and the scheme changes only colours. So
// every rule runs at 1280 px in the light scheme, the rules that look at layout and colour
// at 375 px, and the rules that look at colour in the dark scheme at both widths.
// The colour rules are the slow ones; in the three readings after the first they read
// one code box and one index entry of each list, as every other is coloured the same
// (SAMPLE: what they leave out there).
const COLOUR = ['color-contrast', 'link-in-text-block'];
const LAYOUT = ['scrollable-region-focusable', 'target-size', 'region', 'landmark-unique'];
const SAMPLE = ['.chunk ~ .chunk', 'ul.index > li ~ li', 'figure.output ~ figure.output'];
const readings = [[1280, 'light', null], [375, 'light', LAYOUT], [1280, 'dark', []], [375, 'dark', []]];
const jobs = Math.max(1, Number(process.env.HTML_JOBS || 2)); // pages read at once

for (const [width, scheme, rules] of readings) {
  const context = await browser.newContext({
    viewport: { width, height: width === 375 ? 812 : 800 },
    offline: true,
    javaScriptEnabled: true,
    colorScheme: scheme,
  });
  const queue = [...pages];
  const worker = async () => {
    for (let file = queue.shift(); file; file = queue.shift()) await readPage(context, file, width, scheme, rules);
  };
  await Promise.all(Array.from({ length: jobs }, worker));
  await context.close();
}
await browser.close();

async function readPage(context, file, width, scheme, rules) {
    const page = await context.newPage();
    const problems = [];
    page.on('console', (m) => { if (m.type() === 'error') problems.push('console error: ' + m.text()); });
    page.on('pageerror', (e) => problems.push('page error: ' + e.message));
    page.on('requestfailed', (r) => problems.push('request failed: ' + r.url() + ' ' + (r.failure()?.errorText || '')));
    await page.route('**/*', (route) => {
      const url = route.request().url();
      if (url.startsWith('file:')) return route.continue();
      problems.push('request outside the book: ' + url);
      return route.abort();
    });
    const url = pathToFileURL(path.join(dir, file)).href;
    await page.goto(url, { waitUntil: 'load' });
    const where = `${file} at ${width} px` + (scheme === 'dark' ? ' (dark)' : '');
    // axe-core: every rule of WCAG 2.x A and AA and its best practices
    const axeRun = (rules, exclude) => {
      let b = new AxeBuilder({ page }).options({ preload: false, resultTypes: ['violations'] });
      if (rules) b = b.withRules(rules);
      for (const sel of exclude) b = b.exclude(sel);
      return b.analyze();
    };
    const axe = rules && rules.length === 0 ? { violations: [] } : await axeRun(rules, []);
    if (rules) axe.violations.push(...(await axeRun(COLOUR, SAMPLE)).violations);
    const grave = [];
    for (const v of axe.violations) {
      const impact = v.impact || 'minor';
      axeCount[impact] = (axeCount[impact] || 0) + v.nodes.length;
      const key = impact + ' ' + v.id;
      if (!axeRules.has(key)) axeRules.set(key, { nodes: 0, pages: new Set(), help: v.help });
      const e = axeRules.get(key);
      e.nodes += v.nodes.length;
      e.pages.add(file);
      if (impact === 'serious' || impact === 'critical') {
        grave.push(`${v.id} (${impact}, ${v.nodes.length}x: ${v.nodes.slice(0, 2).map((n) => n.target.join(' ')).join(', ')})`);
      }
    }
    check(grave.length === 0, `${where}: axe-core: ${grave.join('; ')}`);
    if (scheme === 'dark') {
      if (shotPage(file)) {
        await page.screenshot({ path: path.join(shots, `${file.replace(/\.html$/, '')}-${width}-dark.png`) });
      }
      await page.close();
      return;
    }
    const r = await page.evaluate(() => {
      const out = {};
      out.ids = [...document.querySelectorAll('[id]')].map((e) => e.id);
      out.links = [...document.querySelectorAll('a[href]')].map((a) => a.getAttribute('href'));
      out.badImages = [...document.images].filter((i) => !i.complete || i.naturalWidth === 0).map((i) => i.getAttribute('src'));
      out.images = document.images.length;
      out.texSpans = document.querySelectorAll('span.math, .math.inline, .math.display').length;
      out.emptyMath = [...document.querySelectorAll("math")].filter((m) => m.textContent.trim() !== "").filter((m) => {
        const b = m.getBoundingClientRect();
        return b.width === 0 || b.height === 0;
      }).length;
      out.maths = document.querySelectorAll('math').length;
      // Code boxes that scroll sideways, and those of them whose lines keep the width rule.
      const scrolls = (e) => e.scrollWidth > e.clientWidth + 1;
      out.code = [...document.querySelectorAll('pre.code')].map((e) => ({
        scrolls: scrolls(e),
        columns: Math.max(0, ...e.textContent.split('\n').map((l) => l.length)),
        id: e.closest('[id]')?.id || '',
      }));
      // a display formula, or each part of one cut at its \qquad joins
      out.displays = [...document.querySelectorAll('.scroll.display, .display.joins > .part')].map(scrolls);
      out.merror = document.querySelectorAll('merror').length;
      // TeX left in the prose: a control word or $...$ outside code, pre and math.
      const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
      out.tex = [];
      for (let n = walker.nextNode(); n; n = walker.nextNode()) {
        if (n.parentElement.closest('pre, code, math, script, style')) continue;
        const m = n.data.match(/\\[A-Za-z]+|\$[^$\s][^$]*\$|\{\}|LG(CHUNK|BLOCK|Q|PAGE|PART)\d+X/);
        if (m) out.tex.push(m[0] + ' in "' + n.data.trim().slice(0, 60) + '"');
      }
      const vw = document.documentElement.clientWidth;
      out.scrollWidth = document.documentElement.scrollWidth;
      out.viewport = vw;
      out.wide = [];
      if (out.scrollWidth > vw) {
        for (const e of document.body.querySelectorAll('*')) {
          if (e.closest('pre, .scroll')) continue;
          const b = e.getBoundingClientRect();
          if (b.right > vw + 1) out.wide.push(e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') + (e.className ? '.' + e.className : '') + ' ' + Math.round(b.right) + 'px');
          if (out.wide.length >= 5) break;
        }
      }
      return out;
    });
    if (width === 1280) {
      ids.set(file, new Set(r.ids));
      for (const h of r.links) links.push([file, h]);
    }
    check(problems.length === 0, `${where}: ${problems.slice(0, 5).join('; ')}`);
    check(r.badImages.length === 0, `${where}: images that did not load: ${r.badImages.join(' ')}`);
    check(r.texSpans === 0 && r.emptyMath === 0 && r.merror === 0 && r.tex.length === 0,
          `${where}: formulas not rendered: ${r.texSpans} TeX spans, ${r.emptyMath} of ${r.maths} MathML elements drawn empty, ` +
          `${r.merror} merror; ${r.tex.slice(0, 5).join('; ')}`);
    if (width === 375) {
      const bad = r.code.filter((c) => c.scrolls && c.columns <= CODE_COLUMNS);
      if (scheme === 'light') {
        narrow.code += r.code.length;
        narrow.codeScroll += r.code.filter((c) => c.scrolls).length;
        narrow.display += r.displays.length;
        narrow.displayScroll += r.displays.filter((d) => d).length;
      }
      check(bad.length === 0, `${where}: ${bad.length} code boxes scroll sideways though their lines keep ` +
            `${CODE_COLUMNS} columns: ${bad.slice(0, 5).map((c) => '#' + c.id + ' (' + c.columns + ')').join(', ')}`);
      check(r.scrollWidth <= r.viewport, `${where}: the page is ${r.scrollWidth} px wide in a ${r.viewport} px window: ${r.wide.join(', ')}`);
    }
    if (shotPage(file)) {
      await page.screenshot({ path: path.join(shots, `${file.replace(/\.html$/, '')}-${width}.png`) });
    }
    await page.close();
}

// Every link inside the book goes to a page that exists and to an anchor on it, or to a
// file of the book (a figure's SVG).
let bad = [];
for (const [from, href] of links) {
  if (/^(https?|mailto):/.test(href)) continue;
  const u = new URL(href, pathToFileURL(path.join(dir, from)).href);
  if (u.protocol !== 'file:') { bad.push(`${from}: ${href} (not a file of the book)`); continue; }
  const target = path.relative(dir, fileURLToPath(u));
  if (!target.endsWith('.html') && !u.hash && fs.existsSync(path.join(dir, target))) continue; // a figure's SVG
  if (!ids.has(target)) { bad.push(`${from}: ${href} (no page ${target})`); continue; }
  const frag = decodeURIComponent(u.hash.slice(1));
  if (frag && !ids.get(target).has(frag)) bad.push(`${from}: ${href} (no anchor #${frag} in ${target})`);
}
check(bad.length === 0, `${bad.length} of ${links.length} links do not resolve: ${bad.slice(0, 10).join('; ')}`);
for (const [key, e] of [...axeRules].sort((a, b) => b[1].nodes - a[1].nodes)) {
  console.log(`axe: ${key}: ${e.nodes} elements on ${e.pages.size} pages (${e.help})`);
}
console.log(`axe: ${Object.entries(axeCount).map(([k, n]) => `${n} ${k}`).join(', ')} ` +
            `(elements, all pages at 1280 and 375 px, light and dark)`);
console.log(`html: read in ${Math.round((Date.now() - started) / 1000)} s`);
console.log(`html: ${pages.length} pages at 1280 and 375 px, light and dark, ${links.length} links, screenshots in ${shotsArg}`);
console.log(`html: the largest page is ${largest[0]}, ${largest[1]} bytes (limit ${PAGE_LIMIT}); at 375 px ` +
            `${narrow.codeScroll} of ${narrow.code} code boxes and ${narrow.displayScroll} of ${narrow.display} ` +
            `display formulas scroll sideways`);
console.log(`html: ${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
