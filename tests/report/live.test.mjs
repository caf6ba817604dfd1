// tests/report/live.test.mjs: `memlens live --web` in a real browser (issue 29, "Live").
//
// A native server (attach_target) runs under `memlens run`; `memlens live --web` serves its
// capture; headless Chromium opens the page. While the program still runs the page shows its
// known figure (3 x 10,000 bytes in use at keep_blocks), then the new one after more work
// (updates at least once a second); the Snapshot button asks the program for a snapshot, which
// lands in the capture: CAPTURE@snapshot:NAME has exactly what was in use then. A wrong token
// is refused. Run by run.mjs (ctest `report`).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const BUILD = process.env.MEMLENS_BUILD_DIR || path.join(REPO, 'build');
const MEMLENS = path.join(BUILD, 'bin', 'memlens');
const TARGET = path.join(BUILD, 'tests', 'programs', 'attach_target');

let work;
let context;
const children = [];

before(async () => {
  work = mkdtempSync(path.join(tmpdir(), 'memlens-live-test-'));
  context = await chromium.launchPersistentContext(path.join(work, 'profile'), {
    executablePath: process.env.MEMLENS_CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    viewport: { width: 1280, height: 900 },
  });
});

after(async () => {
  for (const child of children) child.kill('SIGKILL');
  if (context) await context.close();
  if (work) rmSync(work, { recursive: true, force: true });
});

// The lines a child writes on one of its streams, as they come.
function lines(stream) {
  const queue = [];
  const waiting = [];
  let rest = '';
  stream.setEncoding('utf8');
  stream.on('data', (chunk) => {
    rest += chunk;
    for (let at; (at = rest.indexOf('\n')) >= 0;) {
      const line = rest.slice(0, at);
      rest = rest.slice(at + 1);
      if (waiting.length) waiting.shift()(line); else queue.push(line);
    }
  });
  return () => (queue.length ? Promise.resolve(queue.shift())
    : new Promise((resolve) => waiting.push(resolve)));
}

function start(command, args) {
  const child = spawn(command, args, { cwd: work, stdio: ['pipe', 'pipe', 'pipe'] });
  children.push(child);
  return child;
}

// The row of keep_blocks in the Top sites table of the report shown now, as text.
async function keepRow(page) {
  const frame = await (await page.$('iframe:not(.hidden)')).contentFrame();
  const row = frame.locator('#top-table tr', { has: frame.locator('td.fn', { hasText: 'keep_blocks' }) });
  return (await row.count()) ? (await row.first().innerText()) : '';
}

async function waitForRow(page, text) {
  const deadline = Date.now() + 30000;
  for (;;) {
    const row = await keepRow(page).catch(() => '');
    if (row.includes(text)) return row;
    assert.ok(Date.now() < deadline, `keep_blocks never showed ${text} (last: ${row})`);
    await page.waitForTimeout(100);
  }
}

test('the live page shows the running figure, updates, and a snapshot asked from it lands', async () => {
  const capture = path.join(work, 'server.mlens');
  const server = start(MEMLENS, ['run', '-o', capture, '--', TARGET]);
  const said = lines(server.stdout);
  assert.equal(await said(), 'ready');
  server.stdin.write('work\n');
  assert.equal(await said(), 'worked 3');

  const live = start(MEMLENS, ['live', '--web', capture]);
  const url = await lines(live.stdout)();
  assert.match(url, /^http:\/\/127\.0\.0\.1:\d+\/\?token=[0-9a-f]{32}$/);

  const refused = await fetch(url.replace(/token=[0-9a-f]+/, 'token=0'));
  assert.equal(refused.status, 403);

  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(url);
  const before = await waitForRow(page, '29.30 KiB');  // 3 x 10,000 in use, the program running
  assert.match(before, /attach_target\.c/);

  server.stdin.write('work\n');
  assert.equal(await said(), 'worked 6');
  await waitForRow(page, '58.59 KiB');  // the page updated by itself

  await page.fill('#moment-name', 'from-the-page');
  await page.click('#snapshot');
  await page.waitForFunction(() => document.getElementById('said').textContent.includes('added'));
  assert.match(await page.textContent('#said'),
    /^snapshot 'from-the-page' added to process \d+ \(attach_target\)/);
  assert.equal(await page.inputValue('#moment-name'), 'from-the-page-2');

  await page.click('#pause');
  assert.equal(await page.textContent('#pause'), 'Resume');
  const updates = await page.evaluate(() => document.body.dataset.updates);
  await page.waitForTimeout(2500);
  assert.equal(await page.evaluate(() => document.body.dataset.updates), updates);  // paused

  server.stdin.end('quit\n');
  assert.equal(await said(), 'bye 2100');
  await new Promise((resolve) => server.on('exit', resolve));
  live.kill('SIGINT');
  const liveStatus = await new Promise((resolve) => live.on('exit', (code) => resolve(code)));
  assert.equal(liveStatus, 0);
  assert.deepEqual(errors, []);

  const top = JSON.parse(execFileSync(MEMLENS, ['top', `${capture}@snapshot:from-the-page`,
    '--by', 'line', '--json', '--limit', '1000'], { encoding: 'utf8' }));
  const kept = top.rows.filter((r) => r.site.function === 'keep_blocks');
  assert.equal(kept.reduce((sum, r) => sum + r.leaked_bytes, 0), 60000);
});

test('another address than 127.0.0.1 is refused unless asked for', () => {
  let failure;
  try {
    execFileSync(MEMLENS, ['live', '--web', '--address', '0.0.0.0', 'x.mlens'],
      { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (e) {
    failure = e;
  }
  assert.equal(failure.status, 2);
  assert.match(failure.stderr, /^memlens: live --web: serving on 0\.0\.0\.0 lets anyone .* add --allow-remote if that is meant\n$/);
});
