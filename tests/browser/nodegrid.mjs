// tests/browser/nodegrid.mjs - the node grid names the GPU a moved job runs
// on (nodegrid_test.sh started the cluster): on the GPU the scheduler
// allocated, the job's name and "→ GPU P"; on GPU P, "runs NAME from GPU L".
// The figures come from GET /nodes, the same API the page reads.

import {chromium} from 'playwright-core';
import path from 'node:path';

const URL = process.env.TS_URL;
const TOKEN = process.env.TS_TOKEN;

async function nodes() {
  const res = await fetch(`${URL}/api/v1/nodes`, {headers: {Authorization: `Bearer ${TOKEN}`}});
  return (await res.json()).nodes;
}

async function main() {
  const node = (await nodes())[0];
  const from = node.gpus.find((g) => (g.moved_jobs || []).length);
  const move = from.moved_jobs[0];
  const job = await (await fetch(`${URL}/api/v1/jobs/${move.id}`, {headers: {Authorization: `Bearer ${TOKEN}`}})).json();
  const browser = await chromium.launch({executablePath: process.env.TS_CHROMIUM, args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu']});
  const errors = [];
  try {
    const page = await (await browser.newContext({viewport: {width: 1400, height: 900}})).newPage();
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(URL);
    await page.getByLabel('Token').fill(TOKEN);
    await page.getByRole('button', {name: 'Sign in'}).click();
    const chips = page.locator('#grid-panel .gpu');
    await chips.first().waitFor();
    const text = async (i) => (await chips.nth(i).textContent()).replace(/\s+/g, ' ');
    const deadline = Date.now() + 20000;
    let allocated = '', running = '';
    for (;;) {
      allocated = await text(from.index);
      running = await text(move.physical_index);
      if ((allocated.includes(`${job.name} → GPU ${move.physical_index}`) && running.includes(`runs ${job.name} from GPU ${from.index}`)) || Date.now() > deadline) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    await page.screenshot({path: path.join(process.env.TS_OUT_DIR, 'nodegrid.png'), fullPage: true});
    if (!allocated.includes(`${job.name} → GPU ${move.physical_index}`))
      throw new Error(`GPU ${from.index} does not say where ${job.name} runs: "${allocated}"`);
    if (!running.includes(`runs ${job.name} from GPU ${from.index}`))
      throw new Error(`GPU ${move.physical_index} does not say it runs ${job.name}: "${running}"`);
    if (errors.length) throw new Error(`page errors: ${errors.join('; ')}`);
    console.log(`ok: GPU ${from.index} "${allocated}", GPU ${move.physical_index} "${running}"`);
  } finally {
    await browser.close();
  }
}

main().catch((e) => {
  console.error(`FAIL: ${e.message}`);
  process.exit(1);
});
