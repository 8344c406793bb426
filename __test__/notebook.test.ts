import { afterEach, beforeAll, describe, expect, it } from 'vitest'
import { execFileSync, spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'

import { NodeSession, PythonSession } from '../index.js'

// nbformat (and matplotlib, when it installs) for the checks: importable, or
// pip-installed once into target/pylib, which the sessions get on PYTHONPATH
const pylib = resolve(__dirname, '..', 'target', 'pylib')
const importable = (mod: string, path?: string) =>
  spawnSync('python3', ['-c', `import ${mod}`], { env: { ...process.env, ...(path ? { PYTHONPATH: path } : {}) } }).status === 0
let pythonPath: string | undefined
let haveMatplotlib = false
let havePandas = false
beforeAll(() => {
  if (!importable('nbformat')) {
    if (!importable('nbformat', pylib)) {
      execFileSync('python3', ['-m', 'pip', 'install', '--quiet', '--target', pylib, 'nbformat'], { stdio: 'inherit' })
    }
    pythonPath = pylib
  }
  if (!importable('matplotlib', pythonPath)) {
    spawnSync('python3', ['-m', 'pip', 'install', '--quiet', '--target', pylib, 'matplotlib'], { stdio: 'inherit' })
    pythonPath = pylib
  }
  haveMatplotlib = importable('matplotlib', pythonPath)
  if (!importable('pandas', pythonPath)) {
    spawnSync('python3', ['-m', 'pip', 'install', '--quiet', '--target', pylib, 'pandas'], { stdio: 'inherit' })
    pythonPath = pylib
  }
  havePandas = importable('pandas', pythonPath)
}, 600_000)

const env = () => (pythonPath ? { PYTHONPATH: pythonPath } : {})

const open: Array<{ close(): Promise<void> }> = []
afterEach(async () => {
  await Promise.all(open.splice(0).map((s) => s.close()))
})
async function python() {
  const s = await PythonSession.start({ env: env() })
  open.push(s)
  return s
}
async function node() {
  const s = await NodeSession.start()
  open.push(s)
  return s
}

/** nbformat's own validation of the file; the notebook read back. */
function validate(path: string): any {
  const check = spawnSync(
    'python3',
    ['-c', 'import sys, nbformat; nb = nbformat.read(sys.argv[1], as_version=4); nbformat.validate(nb); print("valid", nb.nbformat, nb.nbformat_minor)', path],
    { env: { ...process.env, ...env() }, encoding: 'utf8' },
  )
  expect(check.stderr).toBe('')
  expect(check.stdout.trim()).toBe('valid 4 5')
  return JSON.parse(readFileSync(path, 'utf8'))
}

describe('PythonSession: rich display', () => {
  it('gives MIME bundles by IPython protocol for the last value and display()', async () => {
    const s = await python()
    await s.execute(
      [
        'class Rich:',
        '    def _repr_html_(self): return "<b>rich</b>"',
        '    def _repr_markdown_(self): return "**rich**"',
        '    def _repr_png_(self): return b"\\x89PNG\\r\\n\\x1a\\n"',
        '    def _repr_json_(self): return {"a": 1}',
        '    def _repr_latex_(self): return "$x$"',
        '    def _repr_svg_(self): return "<svg/>"',
        '    def __repr__(self): return "Rich()"',
        'class Bundle:',
        '    def _repr_mimebundle_(self, include=None, exclude=None):',
        '        return {"text/html": "<i>b</i>", "application/vnd.custom+json": {"k": [1]}}',
      ].join('\n'),
    )
    const seen: Array<Record<string, unknown>> = []
    const r = await s.execute('display(Bundle(), 42)\nRich()', { onDisplay: (b) => seen.push(b) })
    expect(r.status).toBe('ok')
    expect(r.resultValue).toBe('Rich()')
    expect(r.resultData).toEqual({
      'text/html': '<b>rich</b>',
      'text/markdown': '**rich**',
      'image/svg+xml': '<svg/>',
      'image/png': Buffer.from('\x89PNG\r\n\x1a\n', 'latin1').toString('base64'),
      'application/json': { a: 1 },
      'text/latex': '$x$',
      'text/plain': 'Rich()',
    })
    expect(r.displays).toHaveLength(2)
    expect(r.displays[0]['text/html']).toBe('<i>b</i>')
    expect(r.displays[0]['application/vnd.custom+json']).toEqual({ k: [1] })
    expect(r.displays[0]['text/plain']).toMatch(/^<__main__\.Bundle object at/)
    expect(r.displays[1]).toEqual({ 'text/plain': '42' })
    await new Promise((ok) => setTimeout(ok, 50))
    expect(seen).toEqual(r.displays)
    // a plain value has no bundle
    expect((await s.execute('[1, 2]')).resultData).toBeNull()
  })

  it('shows matplotlib figures as image/png (when matplotlib installs)', async ({ skip }) => {
    if (!haveMatplotlib) skip()
    const s = await python()
    const r = await s.execute('import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.title("t")\nNone')
    expect(r.status).toBe('ok')
    expect(r.displays).toHaveLength(1)
    const png = Buffer.from(String(r.displays[0]['image/png']), 'base64')
    expect(png.subarray(0, 8)).toEqual(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]))
    expect(png.length).toBeGreaterThan(1000)
    // the figure was closed: the next cell shows nothing
    expect((await s.execute('1')).displays).toEqual([])
    // a figure as the last value is the value's bundle
    const fig = await s.execute('fig = plt.figure()\nfig.add_subplot().plot([3, 1])\nfig')
    expect(fig.resultData?.['image/png']).toBeTypeOf('string')
    expect(fig.displays).toEqual([])
  })
})

describe('PythonSession: pandas', () => {
  it('shows a DataFrame as text/html (when pandas installs)', async ({ skip }) => {
    if (!havePandas) skip()
    const s = await python()
    const r = await s.execute('import pandas as pd\npd.DataFrame({"a": [1, 2], "b": ["x", "y"]})')
    expect(r.status).toBe('ok')
    expect(r.resultValue).toContain('a  b')
    expect(String(r.resultData?.['text/html'])).toMatch(/<table[^>]*class="dataframe"/)
    expect(r.resultData?.['text/plain']).toBe(r.resultValue)
  })
})

describe('export and import of notebooks', () => {
  it('a Python session exports nbformat 4.5 with streams, results, displays and errors', async () => {
    const s = await python()
    await s.execute('print("hello")\nx = 41')
    await s.execute('class H:\n    def _repr_html_(self): return "<p>h</p>"\ndisplay(H())\nx + 1')
    await s.execute('1 / 0')
    const history = s.history()
    expect(history.map((c) => c.status)).toEqual(['ok', 'ok', 'error'])
    expect(history[0].stdout).toBe('hello\n')
    const path = join(mkdtempSync(join(tmpdir(), 'exec-nb-')), 'py.ipynb')
    await s.exportNotebook(path)
    const nb = validate(path)
    expect(nb.metadata.kernelspec.language).toBe('python')
    expect(nb.cells).toHaveLength(3)
    expect(nb.cells[0].execution_count).toBe(1)
    expect(nb.cells[0].source.join('')).toBe('print("hello")\nx = 41')
    expect(nb.cells[0].outputs).toEqual([{ output_type: 'stream', name: 'stdout', text: ['hello\n'] }])
    const out1 = nb.cells[1].outputs
    expect(out1.map((o: any) => o.output_type)).toEqual(['display_data', 'execute_result'])
    expect(out1[0].data['text/html']).toEqual(['<p>h</p>'])
    expect(out1[1].data['text/plain']).toEqual(['42'])
    expect(out1[1].execution_count).toBe(2)
    const err = nb.cells[2].outputs.find((o: any) => o.output_type === 'error')
    expect(err.ename).toBe('ZeroDivisionError')
    expect(err.evalue).toBe('division by zero')
    expect(err.traceback.join('\n')).toContain('<cell 3>')
  })

  it('an exported notebook opens in jupyter nbconvert --to html (when nbconvert installs)', async ({ skip }) => {
    // a directory of its own: pip --target does not merge its share/ into an existing one
    const lib = resolve(__dirname, '..', 'target', 'pylib-nbconvert')
    const has = () => importable('nbconvert', lib)
    if (!has()) spawnSync('python3', ['-m', 'pip', 'install', '--quiet', '--target', lib, 'nbconvert'], { stdio: 'inherit' })
    if (!has()) skip()
    const s = await python()
    await s.execute('print("hi")\nclass H:\n    def _repr_html_(self): return "<p id=h>h</p>"\ndisplay(H())\n6 * 7')
    const js = await node()
    await js.execute("console.log('from js'); display.html('<p id=j>j</p>'); 1 + 1")
    for (const [sess, marks] of [[s, ['hi', '>h</p>', '42']], [js, ['from js', '>j</p>', '2']]] as const) {
      const dir = mkdtempSync(join(tmpdir(), 'exec-nb-'))
      const path = join(dir, 'open.ipynb')
      await sess.exportNotebook(path)
      const r = spawnSync('python3', ['-m', 'nbconvert', '--to', 'html', path], {
        // pip --target puts nbconvert's templates under share/jupyter
        env: { ...process.env, PYTHONPATH: lib, JUPYTER_PATH: join(lib, 'share', 'jupyter') },
        encoding: 'utf8',
      })
      expect(r.status, r.stderr).toBe(0)
      const html = readFileSync(join(dir, 'open.html'), 'utf8')
      for (const m of marks) expect(html).toContain(m)
    }
  }, 300_000)

  it("keeps a cell's output and bundles in the order they came, as Jupyter does (Node and Python)", async () => {
    const kinds = (outs: any[]) => outs.map((o) => (o.output_type === 'stream' ? `${o.name}:${o.text.join('')}` : Object.keys(o.data).find((k) => k !== 'text/plain')))
    const want = ['stdout:one\n', 'text/html', 'stderr:two\n', 'stdout:three\n', 'text/markdown', 'stdout:four\n']
    const js = await node()
    await js.execute("console.log('one'); display.html('<i>1</i>'); console.error('two'); console.log('three'); display.markdown('*2*'); console.log('four')")
    const py = await python()
    await py.execute(
      "import sys\nprint('one')\ndisplay({'text/html': '<i>1</i>'}, raw=True)\nprint('two', file=sys.stderr)\nprint('three')\ndisplay({'text/markdown': '*2*'}, raw=True)\nprint('four')",
    )
    for (const s of [js, py]) {
      const path = join(mkdtempSync(join(tmpdir(), 'exec-nb-')), 'order.ipynb')
      await s.exportNotebook(path)
      expect(kinds(validate(path).cells[0].outputs)).toEqual(want)
      const h = s.history()[0]
      expect(h.outputs.map((o) => (o.type === 'stream' ? `${o.name}:${o.text}` : Object.keys(o.data).find((k) => k !== 'text/plain')))).toEqual(want)
      // the result's own fields are as before
      expect(h.stdout).toBe('one\nthree\nfour\n')
      expect(h.stderr).toBe('two\n')
    }
    // output of a child process beside the driver's: every byte is kept, in the order it was read
    await js.execute("console.log('a'); require('node:child_process').execSync('echo b', { stdio: 'inherit' }); display.html('<i>c</i>'); console.log('d')")
    const h = js.history()[1]
    expect(h.stdout).toBe('a\nb\nd\n')
    // a string too long to measure (over 256 Ki characters) makes the same fallback
    const big = await js.execute("process.stdout.write('x'.repeat(300_000)); display.html('<i>e</i>'); console.log('f')")
    expect(big.stdout).toBe('x'.repeat(300_000) + 'f\n')
    expect(js.history()[2].outputs.filter((o) => o.type === 'display')).toHaveLength(1)
    expect(js.history()[2].outputs.map((o) => (o.type === 'stream' ? o.text : '')).join('')).toBe(big.stdout)
    // (where the bundle lands is then as it was read: before or after `d`)
    expect(h.outputs.map((o) => (o.type === 'stream' ? o.text : 'display')).join('')).toMatch(/^a\nb\n(displayd\n|d\ndisplay)$/)
  })

  it('history() keeps the last maxHistory cells, and the export says how many were dropped', async () => {
    const s = await NodeSession.start({ maxHistory: 2 })
    open.push(s)
    for (let i = 1; i <= 5; i++) await s.execute(`${i} * 10`)
    expect(s.history().map((c) => c.value)).toEqual(['40', '50'])
    expect(s.historyDropped).toBe(3)
    const path = join(mkdtempSync(join(tmpdir(), 'exec-nb-')), 'capped.ipynb')
    await s.exportNotebook(path)
    const nb = validate(path)
    expect(nb.metadata.exec_native.dropped_cells).toBe(3)
    expect(nb.cells[0].cell_type).toBe('markdown')
    expect(nb.cells[0].source).toContain('the 3 cells run before these are not in this notebook')
    expect(nb.cells.slice(1).map((c: any) => c.execution_count)).toEqual([4, 5])
    // the default is 1000 cells, and Python takes the option too
    const d = await python()
    expect(d.historyDropped).toBe(0)
    const p = await PythonSession.start({ env: env(), maxHistory: 1 })
    open.push(p)
    await p.execute('1')
    await p.execute('2')
    expect(p.history().map((c) => c.value)).toEqual(['2'])
    expect(p.historyDropped).toBe(1)
    // no history at all
    const none = await NodeSession.start({ maxHistory: 0 })
    open.push(none)
    await none.execute('1')
    expect(none.history()).toEqual([])
    expect(none.historyDropped).toBe(1)
  })

  it('a Node session exports its JS and TS cells, and importNotebook replays them', async () => {
    const s = await node()
    await s.execute('console.log("from js"); const base = 40')
    await s.execute('const n: number = base + 2\ndisplay.html("<b>" + n + "</b>")\nn', { language: 'typescript' })
    await s.execute('throw new Error("nope")')
    const path = join(mkdtempSync(join(tmpdir(), 'exec-nb-')), 'js.ipynb')
    await s.exportNotebook(path)
    const nb = validate(path)
    expect(nb.metadata.kernelspec.language).toBe('typescript')
    expect(nb.cells.map((c: any) => c.metadata.exec_native.language)).toEqual(['javascript', 'typescript', 'javascript'])
    expect(nb.cells[0].outputs[0]).toEqual({ output_type: 'stream', name: 'stdout', text: ['from js\n'] })
    expect(nb.cells[1].outputs.map((o: any) => o.output_type)).toEqual(['display_data', 'execute_result'])
    expect(nb.cells[1].outputs[1].data['text/plain']).toEqual(['42'])
    const err = nb.cells[2].outputs.find((o: any) => o.output_type === 'error')
    expect(err.ename).toBe('Error')
    expect(err.traceback.join('\n')).toContain('at <cell 3>:1:7')

    // replayed into a fresh session, each cell in its recorded language
    const t = await node()
    const results = await t.importNotebook(path)
    expect(results.map((r) => r.status)).toEqual(['ok', 'ok', 'error'])
    expect(results[1].value).toBe('42')
    expect(t.history()).toHaveLength(3)
    await expect(t.importNotebook(join(tmpdir(), 'no-such-notebook.ipynb'))).rejects.toMatchObject({ code: 'ENOENT' })
    const notNb = join(mkdtempSync(join(tmpdir(), 'exec-nb-')), 'bad.ipynb')
    writeFileSync(notNb, '{"x": 1}')
    await expect(t.importNotebook(notNb)).rejects.toThrow(/not a notebook \(no cells\) \(EINVAL\)/)
  })
})
