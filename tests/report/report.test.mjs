// tests/report/report.test.mjs: the HTML report of `memlens report` in a real browser.
//
// Records known programs under `memlens run`, writes their reports, opens them from file:// in
// Debian's Chromium (headless, driven by playwright-core) and checks what a user sees: the
// peak figure, zooming and searching the flame graph, the diff between two moments of the
// timeline, a legend that never hides the peak label, the runtime's blocks apart from the
// program's; and that the page makes no network request, logs no error, and shows hostile
// function names as text. Run by run.mjs (ctest `report`).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { chromium } from 'playwright-core';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const BUILD = process.env.MEMLENS_BUILD_DIR || path.join(REPO, 'build');
const MEMLENS = path.join(BUILD, 'bin', 'memlens');
const PYTHON = process.env.MEMLENS_TEST_PYTHON || 'python3';
const HOSTILE = '<script>alert(1)</script>';

let work;
let context;

before(async () => {
  work = mkdtempSync(path.join(tmpdir(), 'memlens-report-test-'));
  context = await chromium.launchPersistentContext(path.join(work, 'profile'), {
    executablePath: process.env.MEMLENS_CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    viewport: { width: 1280, height: 900 },
  });
});

after(async () => {
  if (context) await context.close();
  if (work) rmSync(work, { recursive: true, force: true });
});

function memlens(...args) {
  return execFileSync(MEMLENS, args, { cwd: work, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

function recordAndReport(name, command) {
  const capture = path.join(work, `${name}.mlens`);
  const html = path.join(work, `${name}.html`);
  memlens('run', '-o', capture, '--', ...command);
  memlens('report', capture, '-o', html);
  return { capture, html };
}

// Opens a report and records everything the page does that a test may object to.
async function open(html) {
  const page = await context.newPage();
  const seen = { console: [], errors: [], requests: [], dialogs: [] };
  page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') seen.console.push(m.text()); });
  page.on('pageerror', (e) => seen.errors.push(String(e)));
  page.on('request', (r) => seen.requests.push(r.url()));
  page.on('dialog', (d) => { seen.dialogs.push(d.message()); d.dismiss().catch(() => {}); });
  const url = pathToFileURL(html).href;
  await page.goto(url);
  await page.waitForSelector('body[data-ready="true"]');
  return { page, seen, url };
}

function assertClean(seen, url) {
  assert.deepEqual(seen.errors, [], 'uncaught exceptions');
  assert.deepEqual(seen.console, [], 'console errors or warnings');
  assert.deepEqual(seen.requests, [url], 'the page requested something besides itself');
  assert.deepEqual(seen.dialogs, [], 'a dialog opened');
}

// The timeline's length in seconds, the page x of a moment on it, and the page y of its middle.
async function timelineCoordinates(page) {
  const svg = page.locator('#timeline-svg');
  const box = await svg.boundingBox();
  const attr = async (n) => Number(await svg.getAttribute(n));
  const [duration, left, width, full] = await Promise.all(
    ['data-duration', 'data-plot-left', 'data-plot-width', 'data-width'].map(attr));
  const x = (s) => box.x + (left + (s / duration) * width) / full * box.width;
  return { duration, x, y: box.y + box.height / 2 };
}

// Drags (or clicks, when from == to) over the timeline at two moments, in seconds.
async function timelineGesture(page, from, to, click) {
  const { x, y } = await timelineCoordinates(page);
  if (click) {
    await page.mouse.click(x(from), y);
    await page.waitForSelector('#snapshot-table');  // the first click shows its moment
    await page.mouse.click(x(to), y);
  } else {
    await page.mouse.move(x(from), y);
    await page.mouse.down();
    await page.mouse.move((x(from) + x(to)) / 2, y);
    await page.mouse.move(x(to), y);
    await page.mouse.up();
  }
}

// The middle of the longest stretch of the timeline with `bytes` in use: a moment inside that
// phase of the program, however much a loaded machine stretched its phases.
function plateauMiddle(heap, bytes) {
  let best = null;
  for (let i = 0; i < heap.length; ++i) {
    if (heap[i].bytes !== bytes || (i > 0 && heap[i - 1].bytes === bytes)) continue;
    let j = i;
    while (j + 1 < heap.length && heap[j + 1].bytes === bytes) ++j;
    const end = j + 1 < heap.length ? heap[j + 1].time_s : heap[j].time_s;
    if (!best || end - heap[i].time_s > best[1] - best[0]) best = [heap[i].time_s, end];
  }
  assert.ok(best, `the timeline reaches ${bytes} bytes`);
  return (best[0] + best[1]) / 2;
}

async function diffRow(page, fn) {
  const row = page.locator('#diff-table tbody tr', { has: page.locator('td.fn', { hasText: new RegExp(`^${fn}$`) }) });
  assert.equal(await row.count(), 1, `one diff row for ${fn}`);
  return (await row.locator('td.change').textContent()).trim();
}

test('phases: peak, zoom, search and diff', async () => {
  const { capture, html } = recordAndReport('phases', [path.join(BUILD, 'tests', 'programs', 'phases')]);
  const summary = JSON.parse(memlens('summary', capture, '--json'));
  assert.equal(summary.totals.peak_bytes, 31457280);
  const { page, seen, url } = await open(html);

  // The peak, human-formatted and exact, as `memlens summary --json` has it.
  const peak = page.locator('#peak-value');
  assert.equal((await peak.textContent()).trim(), '30.00 MiB');
  assert.equal(await peak.getAttribute('data-bytes'), String(summary.totals.peak_bytes));
  assert.match(await peak.getAttribute('title'), /^31,457,280 bytes$/);

  // Zoom: the clicked frame becomes the full width.
  const graph = page.locator('#flame-graph');
  const graphWidth = (await graph.boundingBox()).width;
  const phaseB = page.locator('#flame-graph .fg-node', { hasText: /^phase_b$/ });
  assert.equal(await phaseB.count(), 1);
  const id = await phaseB.getAttribute('data-id');
  const before = (await phaseB.boundingBox()).width;
  assert.ok(before < graphWidth * 0.75, `phase_b starts at 2/3 of the width (${before} of ${graphWidth})`);
  await phaseB.click();
  const zoomed = page.locator(`#flame-graph .fg-node[data-id="${id}"]`);
  assert.ok(Math.abs((await zoomed.boundingBox()).width - graphWidth) <= 3, 'zoomed to the full width');
  assert.equal(await page.locator('#flame-graph .fg-node', { hasText: /^phase_a$/ }).count(), 0,
    'a sibling is out of the zoomed view');
  await page.click('#flame-reset');

  // Search: the matching frame is highlighted, others are not.
  await page.fill('#flame-search', 'phase_b');
  const matches = page.locator('#flame-graph .fg-node.fg-match');
  assert.ok(await matches.count() >= 1);
  assert.deepEqual([...new Set(await matches.allTextContents())], ['phase_b']);
  assert.equal(await page.locator('#flame-graph .fg-node.fg-match', { hasText: /^phase_a$/ }).count(), 0);
  assert.match(await page.locator('#flame-search-info').textContent(), /20\.00 MiB/);

  // Diff between a moment of phase A (10 MiB) and one of phase B (30 MiB): +20 MiB at phase_b.
  const { heap } = JSON.parse(memlens('timeline', capture, '--json'));
  const [inA, inB, afterA] = [10, 30, 20].map((mib) => plateauMiddle(heap, mib * 1048576));
  await timelineGesture(page, inA, inB, false);
  assert.equal(await diffRow(page, 'phase_b'), '+20.00 MiB');
  assert.equal(await page.locator('#diff-table td.fn', { hasText: /^phase_a$/ }).count(), 0,
    'phase A did not change');
  // The same with two clicks; and from phase B to after phase A was freed.
  await timelineGesture(page, inA, inB, true);
  assert.equal(await diffRow(page, 'phase_b'), '+20.00 MiB');
  await timelineGesture(page, inB, afterA, false);
  assert.equal(await diffRow(page, 'phase_a'), '-10.00 MiB');

  // The other trees and views are there.
  await page.click('#flame-tabs button[data-tree="allocated"]');
  assert.equal(await page.locator('#flame-graph .fg-node', { hasText: /^phase_a$/ }).count(), 1);
  assert.ok(await page.locator('#top-table tbody tr').count() >= 2);
  await page.click('#top-table th[data-column="1"]');
  assert.ok(await page.locator('#map-table tbody tr').count() >= 1);
  assertClean(seen, url);
  await page.close();
});

// Needs the Python hooks (a build with Python's headers): Python frames carry the names.
const pythonHooks = readdirSync(path.join(BUILD, 'lib')).some((f) => f.startsWith('libmemlens_python'));

test('a hostile function and file name is shown as text',
  { skip: pythonHooks ? false : 'memlens was built without Python hooks' }, async () => {
  const script = path.join(work, 'hostile.py');
  writeFileSync(script, [
    'def f():',
    '    return [bytearray(200000) for _ in range(10)]',
    `name = ${JSON.stringify(HOSTILE)}`,
    'f.__code__ = f.__code__.replace(co_name=name, co_qualname=name,',
    `                                co_filename=${JSON.stringify('<img src=x onerror=alert(2)>.py')})`,
    'kept = f()',
    '',
  ].join('\n'));
  const { html } = recordAndReport('hostile', [PYTHON, script]);
  const raw = readFileSync(html, 'utf8');
  assert.ok(!raw.includes(HOSTILE), 'the name is escaped in the file');
  assert.ok(!raw.includes('<img src=x'), 'the file name is escaped in the file');
  const { page, seen, url } = await open(html);
  const node = page.locator('#flame-graph .fg-node', { hasText: HOSTILE });
  assert.ok(await node.count() >= 1, 'the hostile name is shown in the flame graph');
  assert.equal((await node.first().textContent()), HOSTILE);
  const row = page.locator('#top-table td.fn', { hasText: HOSTILE });
  assert.ok(await row.count() >= 1, 'and in the table');
  await node.first().click();
  await page.fill('#flame-search', '<script>');
  assert.ok(await page.locator('#flame-graph .fg-match').count() >= 1);
  assert.equal(await page.locator('script').count(), 2, 'no script element was added');
  assert.equal(await page.locator('img').count(), 0, 'no image element was added');
  assertClean(seen, url);
  await page.close();
});

test('the program\'s markers show on the timeline', async () => {
  const { html } = recordAndReport('game_loop', [path.join(BUILD, 'examples', 'game_loop')]);
  const { page, seen, url } = await open(html);
  assert.equal(await page.locator('#timeline-svg line.marker-mark').count(), 101);
  assert.equal(await page.locator('#timeline-svg line.marker-mark[data-label="frame (loop)"]').count(), 100);
  assert.equal(await page.locator('#timeline-markers').textContent(),
    'markers: frame (loop) \u00d7100, shutdown');
  assertClean(seen, url);
  await page.close();
});

test('a run of several processes shows its process tree and their figures added up', async () => {
  // spawns 2: the program, 2 fork+exec children (200 and 100 bytes at child_block), one through
  // posix_spawn (300), one through system() (400, under a shell), and a fork that runs nothing
  // (7777 of its own, and the program's 1000 it inherited).
  const run = path.join(work, 'spawns-run');
  memlens('run', '--follow-children', '-o', run, '--',
    path.join(BUILD, 'tests', 'programs', 'spawns'), '2');
  const html = path.join(work, 'spawns-run.html');
  memlens('report', run, '-o', html);
  const { page, seen, url } = await open(html);
  assert.equal(await page.locator('#processes').isVisible(), true);
  const rows = page.locator('#processes-table tbody tr');
  const count = await rows.count();
  assert.ok(count === 6 || count === 7, `${count} processes`);  // 7: a shell that forked for system()
  const first = await rows.nth(0).locator('td').first().textContent();
  assert.match(first, /^\d+ \S*spawns 2$/);
  assert.equal(await page.locator('#processes-table td.fn', { hasText: '(forked)' }).count(), 1);
  assert.equal(await page.locator('#processes-table svg.spark').count(), count);
  // The top sites add up the processes' same line: every child's block at child_block.
  const data = JSON.parse(await page.locator('#memlens-data').textContent());
  assert.equal(data.capture.processes, count);
  const childLine = readFileSync(path.join(REPO, 'tests', 'programs', 'spawns.c'), 'utf8')
    .split('\n').findIndex((l) => l.includes('// @child_block')) + 1;
  const row = page.locator('#top-table tbody tr', { hasText: `spawns.c:${childLine}` });
  assert.equal(await row.count(), 1);
  assert.match(await row.textContent(), /1000 B/);  // 100 + 200 + 300 + 400
  assertClean(seen, url);
  await page.close();
});

// Boxes of two elements on the page overlap (their areas intersect).
function overlaps(a, b) {
  return a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height;
}

test('the timeline\'s legend and its peak label do not overlap', async () => {
  // The peak at the top right corner of the chart, where the legend used to be drawn.
  const { html } = recordAndReport('late_peak',
    [path.join(BUILD, 'tests', 'programs', 'late_peak')]);
  const { page, seen, url } = await open(html);
  const timeline = page.locator('#timeline');
  const legend = timeline.getByText('heap in use');
  const peak = timeline.getByText(/^peak \d/);
  assert.equal(await legend.count(), 1);
  assert.equal((await peak.textContent()), 'peak 30.00 MiB');
  const [legendBox, peakBox, chartBox] = await Promise.all(
    [legend.boundingBox(), peak.boundingBox(), page.locator('#timeline-svg').boundingBox()]);
  assert.ok(!overlaps(legendBox, peakBox), `legend ${JSON.stringify(legendBox)} and peak label ` +
    `${JSON.stringify(peakBox)} overlap`);
  assert.ok(peakBox.x >= chartBox.x && peakBox.x + peakBox.width <= chartBox.x + chartBox.width,
    'the peak label lies inside the chart');
  assertClean(seen, url);
  await page.close();
});

test('the runtime\'s own blocks are shown apart from what the program left', async () => {
  const { capture, html } = recordAndReport('runtime_noise',
    [path.join(BUILD, 'tests', 'programs', 'runtime_noise')]);
  const summary = JSON.parse(memlens('summary', capture, '--json'));
  const { page, seen, url } = await open(html);
  assert.equal(await page.locator('#in-use-value').getAttribute('data-bytes'), '1000');
  const runtime = page.locator('#runtime-value');
  assert.equal(await runtime.getAttribute('data-bytes'), String(summary.runtime.bytes));
  assert.ok(summary.runtime.bytes > 0);
  assert.match(await page.locator('.card', { has: runtime }).textContent(),
    /2 blocks the C\/C\+\+ runtime keeps for the life of the process \(not leaks\)/);
  assertClean(seen, url);
  await page.close();
});

// As the page formats bytes (report.js fmtBytes, format_units.cc).
function fmtSec(s) { return s.toFixed(3) + " s"; }

function fmtBytes(n) {
  if (n < 1024) return n + ' B';
  let v = n;
  let u = 0;
  while (v >= 1024 && u < 4) { v /= 1024; ++u; }
  return v.toFixed(2) + ' ' + ['B', 'KiB', 'MiB', 'GiB', 'TiB'][u];
}

test('a sampled capture\'s figures carry their standard error on the flame graph, the timeline ' +
     'and the checkpoints; a full capture\'s carry none', async () => {
  const program = path.join(BUILD, 'tests', 'programs', 'estimate_errors');
  const capture = path.join(work, 'estimates.mlens');
  const html = path.join(work, 'estimates.html');
  execFileSync(MEMLENS, ['run', '-o', capture, '--sample-rate', '524288', '--', program],
    { cwd: work, env: { ...process.env, MEMLENS_SAMPLE_SEED: '20261126' },
      stdio: ['ignore', 'pipe', 'pipe'] });
  memlens('report', capture, '-o', html);
  const t = JSON.parse(memlens('summary', capture, '--json')).totals;
  const rows = JSON.parse(memlens('top', capture, '--json', '--by', 'function')).rows;
  const small = rows.find((r) => r.site.function === 'small');
  const pm = (error) => ' \u00b1' + fmtBytes(Math.round(error));
  const { page, seen, url } = await open(html);

  // The flame graph (peak memory): its total, a frame's tooltip and the hover line.
  assert.ok((await page.locator('#flame-info').textContent()).startsWith(
    'Peak memory: ' + fmtBytes(t.peak_bytes) + pm(t.peak_bytes_error) + ' in '));
  const frame = page.locator('#flame-graph .fg-node', { hasText: /^small$/ });
  assert.equal(await frame.count(), 1);
  const smallPeak = fmtBytes(small.peak_bytes) + pm(small.peak_bytes_error);
  assert.ok((await frame.getAttribute('title')).includes('\n' + smallPeak + ' ('),
    await frame.getAttribute('title'));
  await frame.hover();
  assert.ok((await page.locator('#flame-hover').textContent()).includes(smallPeak));
  // The timeline's peak label.
  assert.equal(await page.locator('#timeline-peak').textContent(),
    'peak ' + fmtBytes(t.peak_bytes) + pm(t.peak_bytes_error));

  // A checkpoint at the end: every kept small block is live, with its error; then a diff from
  // the start, whose changes carry theirs too.
  const { duration, x, y } = await timelineCoordinates(page);
  await page.mouse.click(x(duration * 0.98), y);
  await page.waitForSelector('#snapshot-table');
  assert.match(await page.locator('#diff-title').textContent(), / \u00b1\S+ \S+ \(click/);
  const row = page.locator('#snapshot-table tbody tr', { has: page.locator('td.fn', { hasText: /^small$/ }) });
  assert.equal(await row.count(), 1);
  assert.equal((await row.locator('td.num').first().textContent()).trim(),
    fmtBytes(small.leaked_bytes) + pm(small.leaked_bytes_error));
  await page.mouse.click(x(duration * 0.02), y);
  await page.waitForSelector('#diff-table');
  // Both moments' heap and the change: three.
  assert.equal((await page.locator('#diff-title').textContent()).split('\u00b1').length - 1, 3);
  for (const cell of await page.locator('#diff-table td.change').allTextContents()) {
    assert.match(cell, /^[+-]\S+ \S+ \u00b1\S+ \S+$/);
  }
  assertClean(seen, url);
  await page.close();

  // Full tracing: no \u00b1 anywhere, text or tooltips.
  const plain = recordAndReport('estimates_full', [program]);
  const opened = await open(plain.html);
  const shown = await opened.page.evaluate(() => document.body.innerText +
    [...document.querySelectorAll('[title]')].map((e) => e.title).join('\n'));
  assert.ok(!shown.includes('\u00b1'), 'a full capture\'s report shows no \u00b1');
  assertClean(opened.seen, opened.url);
  await opened.page.close();
});

test('the memory map plays over the recording: at a moment of each phase the largest gap and ' +
     'fill shown are the program\'s own layout', async () => {
  // fragments: 65 blocks of 16 KiB, then every odd one freed, then the even ones 10..40; it
  // prints each phase's figures, computed from its own pointers, after the phase's marker.
  const capture = path.join(work, 'fragments.mlens');
  const html = path.join(work, 'fragments.html');
  const printed = memlens('run', '-o', capture, '--', path.join(BUILD, 'tests', 'programs', 'fragments'));
  const layout = new Map(printed.split('\n').filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l)).map((l) => [l.phase, l]));
  assert.deepEqual([...layout.keys()], ['filled', 'holes', 'hollow']);
  assert.equal(layout.get('filled').largest_gap, 16, 'one chunk header between blocks');
  memlens('report', capture, '-o', html);
  const { page, seen, url } = await open(html);
  const data = JSON.parse(await page.locator('#memlens-data').textContent());
  const frames = data.address_map.frames;
  assert.equal(frames.length, 40);
  const markerAt = (name) => data.timeline.markers.find((m) => m[1] === name)[0];
  const hex = (n) => '0x' + n.toString(16);
  const pct = (part, whole) => (100 * part / whole).toFixed(1) + '%';

  // The frame nearest the middle of each phase (each lasts 400 ms; frames are 40 over the run).
  const phases = ['filled', 'holes', 'hollow'];
  for (const [k, phase] of phases.entries()) {
    const from = markerAt(phase);
    const to = k + 1 < phases.length ? markerAt(phases[k + 1]) : data.capture.duration_s;
    const middle = (from + to) / 2;
    let index = 0;
    for (let i = 1; i < frames.length; ++i) {
      if (Math.abs(frames[i].seconds - middle) < Math.abs(frames[index].seconds - middle)) index = i;
    }
    assert.ok(frames[index].seconds > from + 0.05 && frames[index].seconds < to - 0.05,
      `a frame inside ${phase} (${from}..${to}): ${frames[index].seconds}`);
    if (phase === 'hollow') {  // by the timeline: a click selects the nearest frame
      await page.locator('#timeline-svg').scrollIntoViewIfNeeded();
      const { x, y } = await timelineCoordinates(page);
      await page.mouse.click(x(frames[index].seconds), y);
    } else {  // by the slider, from the keyboard
      await page.locator('#map-slider').focus();
      await page.keyboard.press('Home');
      for (let i = 0; i < index; ++i) await page.keyboard.press('ArrowRight');
    }
    assert.equal(await page.locator('#map-slider').inputValue(), String(index));
    assert.match(await page.locator('#map-time').textContent(),
      new RegExp('^' + frames[index].seconds.toFixed(3).replace('.', '\\.') + ' s'));
    const known = layout.get(phase);
    const row = page.locator(`#map-frame-table tbody tr[data-begin="${hex(known.begin)}"]`);
    assert.equal(await row.count(), 1, `the region of the blocks in ${phase}`);
    assert.equal(await row.getAttribute('data-end'), hex(known.end));
    const gap = row.locator('td.gap');
    assert.equal(await gap.getAttribute('data-bytes'), String(known.largest_gap), `${phase}: gap`);
    assert.equal((await gap.textContent()).trim(), fmtBytes(known.largest_gap));
    const inUse = row.locator('td.in-use');
    assert.equal(await inUse.getAttribute('data-bytes'), String(known.in_use_bytes), `${phase}: in use`);
    assert.equal((await inUse.textContent()).trim(), fmtBytes(known.in_use_bytes));
    assert.equal((await row.locator('td.fill-share').textContent()).trim(),
      pct(known.in_use_bytes, known.end - known.begin), `${phase}: fill`);
    // The strip: as many parts full as the blocks cover whole.
    assert.match(await row.locator('svg.strip').getAttribute('aria-label'), /^64 parts: /);
  }
  // Playing runs to the last frame and stops.
  await page.locator('#map-slider').focus();
  await page.keyboard.press('End');
  await page.keyboard.press('ArrowLeft');
  await page.click('#map-play');
  assert.equal(await page.locator('#map-play').getAttribute('aria-pressed'), 'true');
  await page.waitForFunction(() => document.getElementById('map-play').textContent === 'Play');
  assert.equal(await page.locator('#map-slider').inputValue(), String(frames.length - 1));
  assertClean(seen, url);
  await page.close();
});

test('resident memory is shown part by part over time, each sample\'s parts as memlens rss ' +
     'gives them', async () => {
  // rss_stacks: 20 threads with 8 MiB stacks, each writing 1 MiB of its own, then the marker
  // "stacks" (category "rss"; a mapping sample is read just before it).
  const capture = path.join(work, 'rss_stacks.mlens');
  const html = path.join(work, 'rss_stacks.html');
  memlens('run', '-o', capture, '--', path.join(BUILD, 'tests', 'programs', 'rss_stacks'));
  memlens('report', capture, '-o', html);
  const rss = JSON.parse(memlens('rss', capture, '--json'));
  const { page, seen, url } = await open(html);
  const data = JSON.parse(await page.locator('#memlens-data').textContent());
  const ids = data.resident_parts.parts.map((p) => p.part);
  assert.deepEqual(ids, rss.parts.map((p) => p.part));
  assert.ok(await page.locator('#rss').isVisible());
  // At first the last sample: every part's bytes are memlens rss's last sample's.
  const rows = page.locator('#rss-table tbody tr');
  assert.equal(await rows.count(), ids.length);
  const last = rss.over_time[rss.over_time.length - 1];
  for (const id of ids) {
    const cell = page.locator(`#rss-table tbody tr[data-part="${id}"] td.num`).first();
    assert.equal(await cell.getAttribute('data-bytes'), String(last.parts[id]), id);
  }
  // A click at the marker shows the sample read just before it: the threads' stacks resident.
  const touched = data.timeline.markers.find((m) => m[1] === 'stacks (rss)')[0];
  await page.locator('#rss-svg').scrollIntoViewIfNeeded();
  const box = await page.locator('#rss-svg').boundingBox();
  const scale = box.width / 1000;  // the chart's viewBox is 1000 wide, its plot 78..988
  await page.mouse.click(box.x + (78 + touched / data.capture.duration_s * 910) * scale,
    box.y + box.height / 2);
  const sample = [...rss.over_time].reverse().find((s) => s.seconds <= touched + 1e-9);
  assert.match(await page.locator('#rss-info').textContent(),
    new RegExp('^At ' + fmtSec(sample.seconds).replace('.', '\\.')));
  const stacks = await page.locator('#rss-table tbody tr[data-part="stacks"] td.num').first()
    .getAttribute('data-bytes');
  assert.equal(stacks, String(sample.parts.stacks));
  assert.ok(Number(stacks) >= 20 * 1024 * 1024, `20 threads' 1 MiB each: ${stacks}`);
  assertClean(seen, url);
  await page.close();
});
