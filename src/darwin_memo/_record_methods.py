"""Methods of the package's records, written by ``records.write_methods_module``.

Generated: do not edit. ``darwin_memo.records`` uses a factory here when a record's
methods source and scope match its key exactly (else it compiles them itself), so
importing a record reads bytecode instead of parsing text. tests/test_records.py
checks that this file is current.
"""
# ruff: noqa
# mypy: ignore-errors
# fmt: off

def _0(_FACTORY, _cls, _frozen_error, _names, _object_setattr):  # darwin_memo.consolidate.Merge
    def __init__(self, heir, members, clipped):
        _object_setattr(self, 'heir', heir)
        _object_setattr(self, 'members', members)
        _object_setattr(self, 'clipped', clipped)
    def __repr__(self):
        return f"{type(self).__qualname__}(heir={self.heir!r}, members={self.members!r}, clipped={self.clipped!r})"
    def __eq__(self, other):
        if other.__class__ is self.__class__:
            return (self.heir,self.members,self.clipped,) == (other.heir,other.members,other.clipped,)
        return NotImplemented
    def __hash__(self):
        return hash((self.heir,self.members,self.clipped,))
    def __setattr__(self, name, value):
        if type(self) is _cls or name in _names:
            raise _frozen_error(name)
        super(_cls, self).__setattr__(name, value)
    def __delattr__(self, name):
        if type(self) is _cls or name in _names:
            raise _frozen_error(name)
        super(_cls, self).__delattr__(name)
    return (__init__, __repr__, __eq__, __hash__, __setattr__, __delattr__,)

def _1(_FACTORY, _cls, _frozen_error, _names, _object_setattr):  # darwin_memo.diagnose.Finding
    def __init__(self, code, severity, summary, evidence, fix):
        _object_setattr(self, 'code', code)
        _object_setattr(self, 'severity', severity)
        _object_setattr(self, 'summary', summary)
        _object_setattr(self, 'evidence', evidence)
        _object_setattr(self, 'fix', fix)
    def __repr__(self):
        return f"{type(self).__qualname__}(code={self.code!r}, severity={self.severity!r}, summary={self.summary!r}, evidence={self.evidence!r}, fix={self.fix!r})"
    def __eq__(self, other):
        if other.__class__ is self.__class__:
            return (self.code,self.severity,self.summary,self.evidence,self.fix,) == (other.code,other.severity,other.summary,other.evidence,other.fix,)
        return NotImplemented
    def __hash__(self):
        return hash((self.code,self.severity,self.summary,self.evidence,self.fix,))
    def __setattr__(self, name, value):
        if type(self) is _cls or name in _names:
            raise _frozen_error(name)
        super(_cls, self).__setattr__(name, value)
    def __delattr__(self, name):
        if type(self) is _cls or name in _names:
            raise _frozen_error(name)
        super(_cls, self).__delattr__(name)
    return (__init__, __repr__, __eq__, __hash__, __setattr__, __delattr__,)

def _2(_FACTORY, _fact_totals, _frozen_error):  # darwin_memo.economy.Books
    def __init__(self, totals=_FACTORY):
        self.totals = _fact_totals() if totals is _FACTORY else totals
    def __repr__(self):
        return f"{type(self).__qualname__}(totals={self.totals!r})"
    def __eq__(self, other):
        if other.__class__ is self.__class__:
            return (self.totals,) == (other.totals,)
        return NotImplemented
    return (__init__, __repr__, __eq__,)

def _3(_FACTORY, _dflt_relaxed, _fact_closed, _fact_events, _fact_notes, _fact_opened, _fact_touched, _frozen_error):  # darwin_memo.ledger.Changes
    def __init__(self, events=_FACTORY, notes=_FACTORY, opened=_FACTORY, closed=_FACTORY, touched=_FACTORY, relaxed=_dflt_relaxed):
        self.events = _fact_events() if events is _FACTORY else events
        self.notes = _fact_notes() if notes is _FACTORY else notes
        self.opened = _fact_opened() if opened is _FACTORY else opened
        self.closed = _fact_closed() if closed is _FACTORY else closed
        self.touched = _fact_touched() if touched is _FACTORY else touched
        self.relaxed = relaxed
    def __repr__(self):
        return f"{type(self).__qualname__}(events={self.events!r}, notes={self.notes!r}, opened={self.opened!r}, closed={self.closed!r}, touched={self.touched!r}, relaxed={self.relaxed!r})"
    def __eq__(self, other):
        if other.__class__ is self.__class__:
            return (self.events,self.notes,self.opened,self.closed,self.touched,self.relaxed,) == (other.events,other.notes,other.opened,other.closed,other.touched,other.relaxed,)
        return NotImplemented
    return (__init__, __repr__, __eq__,)

def _4(_FACTORY, _fact_id, _frozen_error):  # darwin_memo.ledger.Ticket
    def __init__(self, query, answer, deciding_entry, supporting_entries, born_tick, id=_FACTORY):
        self.query = query
        self.answer = answer
        self.deciding_entry = deciding_entry
        self.supporting_entries = supporting_entries
        self.born_tick = born_tick
        self.id = _fact_id() if id is _FACTORY else id
    def __repr__(self):
        return f"{type(self).__qualname__}(query={self.query!r}, answer={self.answer!r}, deciding_entry={self.deciding_entry!r}, supporting_entries={self.supporting_entries!r}, born_tick={self.born_tick!r}, id={self.id!r})"
    def __eq__(self, other):
        if other.__class__ is self.__class__:
            return (self.query,self.answer,self.deciding_entry,self.supporting_entries,self.born_tick,self.id,) == (other.query,other.answer,other.deciding_entry,other.supporting_entries,other.born_tick,other.id,)
        return NotImplemented
    return (__init__, __repr__, __eq__,)

def _5(_FACTORY, _dflt_annotated_text, _dflt_attribution, _dflt_deciding_entry, _dflt_refused, _fact_supporting_entries, _frozen_error):  # darwin_memo.protocol.ProtocolAnswer
    def __init__(self, text, deciding_entry=_dflt_deciding_entry, supporting_entries=_FACTORY, annotated_text=_dflt_annotated_text, refused=_dflt_refused, attribution=_dflt_attribution):
        self.text = text
        self.deciding_entry = deciding_entry
        self.supporting_entries = _fact_supporting_entries() if supporting_entries is _FACTORY else supporting_entries
        self.annotated_text = annotated_text
        self.refused = refused
        self.attribution = attribution
    def __repr__(self):
        return f"{type(self).__qualname__}(text={self.text!r}, deciding_entry={self.deciding_entry!r}, supporting_entries={self.supporting_entries!r}, annotated_text={self.annotated_text!r}, refused={self.refused!r}, attribution={self.attribution!r})"
    def __eq__(self, other):
        if other.__class__ is self.__class__:
            return (self.text,self.deciding_entry,self.supporting_entries,self.annotated_text,self.refused,self.attribution,) == (other.text,other.deciding_entry,other.supporting_entries,other.annotated_text,other.refused,other.attribution,)
        return NotImplemented
    return (__init__, __repr__, __eq__,)

def _6(_FACTORY, _cls, _frozen_error, _names, _object_setattr):  # darwin_memo.store.LoadProblem
    def __init__(self, where, index, message):
        _object_setattr(self, 'where', where)
        _object_setattr(self, 'index', index)
        _object_setattr(self, 'message', message)
    def __repr__(self):
        return f"{type(self).__qualname__}(where={self.where!r}, index={self.index!r}, message={self.message!r})"
    def __eq__(self, other):
        if other.__class__ is self.__class__:
            return (self.where,self.index,self.message,) == (other.where,other.index,other.message,)
        return NotImplemented
    def __hash__(self):
        return hash((self.where,self.index,self.message,))
    def __setattr__(self, name, value):
        if type(self) is _cls or name in _names:
            raise _frozen_error(name)
        super(_cls, self).__setattr__(name, value)
    def __delattr__(self, name):
        if type(self) is _cls or name in _names:
            raise _frozen_error(name)
        super(_cls, self).__delattr__(name)
    return (__init__, __repr__, __eq__, __hash__, __setattr__, __delattr__,)

def _7(_FACTORY, _dflt_admission_window, _dflt_conflict_threshold, _dflt_consolidate_every, _dflt_credit_gain, _dflt_cycles, _dflt_merge_similarity, _dflt_merge_source_policy, _dflt_merge_threshold, _dflt_resource_scale, _dflt_supporting_share, _dflt_upkeep_requires_settlement, _dflt_write_experience, _frozen_error):  # darwin_memo.survival.SurvivalConfig
    def __init__(self, cycles=_dflt_cycles, credit_gain=_dflt_credit_gain, supporting_share=_dflt_supporting_share, consolidate_every=_dflt_consolidate_every, merge_threshold=_dflt_merge_threshold, conflict_threshold=_dflt_conflict_threshold, write_experience=_dflt_write_experience, resource_scale=_dflt_resource_scale, admission_window=_dflt_admission_window, upkeep_requires_settlement=_dflt_upkeep_requires_settlement, merge_source_policy=_dflt_merge_source_policy, merge_similarity=_dflt_merge_similarity):
        self.cycles = cycles
        self.credit_gain = credit_gain
        self.supporting_share = supporting_share
        self.consolidate_every = consolidate_every
        self.merge_threshold = merge_threshold
        self.conflict_threshold = conflict_threshold
        self.write_experience = write_experience
        self.resource_scale = resource_scale
        self.admission_window = admission_window
        self.upkeep_requires_settlement = upkeep_requires_settlement
        self.merge_source_policy = merge_source_policy
        self.merge_similarity = merge_similarity
        self.__post_init__()
    def __repr__(self):
        return f"{type(self).__qualname__}(cycles={self.cycles!r}, credit_gain={self.credit_gain!r}, supporting_share={self.supporting_share!r}, consolidate_every={self.consolidate_every!r}, merge_threshold={self.merge_threshold!r}, conflict_threshold={self.conflict_threshold!r}, write_experience={self.write_experience!r}, resource_scale={self.resource_scale!r}, admission_window={self.admission_window!r}, upkeep_requires_settlement={self.upkeep_requires_settlement!r}, merge_source_policy={self.merge_source_policy!r}, merge_similarity={self.merge_similarity!r})"
    def __eq__(self, other):
        if other.__class__ is self.__class__:
            return (self.cycles,self.credit_gain,self.supporting_share,self.consolidate_every,self.merge_threshold,self.conflict_threshold,self.write_experience,self.resource_scale,self.admission_window,self.upkeep_requires_settlement,self.merge_source_policy,self.merge_similarity,) == (other.cycles,other.credit_gain,other.supporting_share,other.consolidate_every,other.merge_threshold,other.conflict_threshold,other.write_experience,other.resource_scale,other.admission_window,other.upkeep_requires_settlement,other.merge_source_policy,other.merge_similarity,)
        return NotImplemented
    return (__init__, __repr__, __eq__,)

def _8(_FACTORY, _fact_stats, _fact_trajectories, _frozen_error):  # darwin_memo.survival.SurvivalReport
    def __init__(self, stats=_FACTORY, trajectories=_FACTORY):
        self.stats = _fact_stats() if stats is _FACTORY else stats
        self.trajectories = _fact_trajectories() if trajectories is _FACTORY else trajectories
    def __repr__(self):
        return f"{type(self).__qualname__}(stats={self.stats!r}, trajectories={self.trajectories!r})"
    def __eq__(self, other):
        if other.__class__ is self.__class__:
            return (self.stats,self.trajectories,) == (other.stats,other.trajectories,)
        return NotImplemented
    return (__init__, __repr__, __eq__,)

def _9(_FACTORY, _dflt_nonzero_outcomes, _dflt_silent, _dflt_tasks, _frozen_error):  # darwin_memo.types.CycleStats
    def __init__(self, cycle, population, births, deaths, merges, total_energy, resource_delta, tasks=_dflt_tasks, silent=_dflt_silent, nonzero_outcomes=_dflt_nonzero_outcomes):
        self.cycle = cycle
        self.population = population
        self.births = births
        self.deaths = deaths
        self.merges = merges
        self.total_energy = total_energy
        self.resource_delta = resource_delta
        self.tasks = tasks
        self.silent = silent
        self.nonzero_outcomes = nonzero_outcomes
    def __repr__(self):
        return f"{type(self).__qualname__}(cycle={self.cycle!r}, population={self.population!r}, births={self.births!r}, deaths={self.deaths!r}, merges={self.merges!r}, total_energy={self.total_energy!r}, resource_delta={self.resource_delta!r}, tasks={self.tasks!r}, silent={self.silent!r}, nonzero_outcomes={self.nonzero_outcomes!r})"
    def __eq__(self, other):
        if other.__class__ is self.__class__:
            return (self.cycle,self.population,self.births,self.deaths,self.merges,self.total_energy,self.resource_delta,self.tasks,self.silent,self.nonzero_outcomes,) == (other.cycle,other.population,other.births,other.deaths,other.merges,other.total_energy,other.resource_delta,other.tasks,other.silent,other.nonzero_outcomes,)
        return NotImplemented
    return (__init__, __repr__, __eq__,)

def _10(_FACTORY, _dflt_born_cycle, _dflt_energy, _dflt_imported_at, _dflt_imported_from, _dflt_juvenile, _dflt_kind, _dflt_last_used_cycle, _dflt_pinned, _dflt_probation, _dflt_uses, _fact_extra, _fact_id, _fact_lineage, _fact_recorded_ts, _fact_sources, _frozen_error):  # darwin_memo.types.MemoryEntry
    def __init__(self, question, answer, kind=_dflt_kind, sources=_FACTORY, energy=_dflt_energy, born_cycle=_dflt_born_cycle, recorded_ts=_FACTORY, last_used_cycle=_dflt_last_used_cycle, uses=_dflt_uses, lineage=_FACTORY, pinned=_dflt_pinned, probation=_dflt_probation, juvenile=_dflt_juvenile, imported_from=_dflt_imported_from, imported_at=_dflt_imported_at, id=_FACTORY, extra=_FACTORY):
        self.question = question
        self.answer = answer
        self.kind = kind
        self.sources = _fact_sources() if sources is _FACTORY else sources
        self.energy = energy
        self.born_cycle = born_cycle
        self.recorded_ts = _fact_recorded_ts() if recorded_ts is _FACTORY else recorded_ts
        self.last_used_cycle = last_used_cycle
        self.uses = uses
        self.lineage = _fact_lineage() if lineage is _FACTORY else lineage
        self.pinned = pinned
        self.probation = probation
        self.juvenile = juvenile
        self.imported_from = imported_from
        self.imported_at = imported_at
        self.id = _fact_id() if id is _FACTORY else id
        self.extra = _fact_extra() if extra is _FACTORY else extra
    def __repr__(self):
        return f"{type(self).__qualname__}(question={self.question!r}, answer={self.answer!r}, kind={self.kind!r}, sources={self.sources!r}, energy={self.energy!r}, born_cycle={self.born_cycle!r}, recorded_ts={self.recorded_ts!r}, last_used_cycle={self.last_used_cycle!r}, uses={self.uses!r}, lineage={self.lineage!r}, pinned={self.pinned!r}, probation={self.probation!r}, juvenile={self.juvenile!r}, imported_from={self.imported_from!r}, imported_at={self.imported_at!r}, id={self.id!r})"
    def __eq__(self, other):
        if other.__class__ is self.__class__:
            return (self.question,self.answer,self.kind,self.sources,self.energy,self.born_cycle,self.recorded_ts,self.last_used_cycle,self.uses,self.lineage,self.pinned,self.probation,self.juvenile,self.imported_from,self.imported_at,self.id,) == (other.question,other.answer,other.kind,other.sources,other.energy,other.born_cycle,other.recorded_ts,other.last_used_cycle,other.uses,other.lineage,other.pinned,other.probation,other.juvenile,other.imported_from,other.imported_at,other.id,)
        return NotImplemented
    return (__init__, __repr__, __eq__,)

def _11(_FACTORY, _cls, _dflt_detail, _frozen_error, _names, _object_setattr):  # darwin_memo.types.Outcome
    def __init__(self, delta, detail=_dflt_detail):
        _object_setattr(self, 'delta', delta)
        _object_setattr(self, 'detail', detail)
    def __repr__(self):
        return f"{type(self).__qualname__}(delta={self.delta!r}, detail={self.detail!r})"
    def __eq__(self, other):
        if other.__class__ is self.__class__:
            return (self.delta,self.detail,) == (other.delta,other.detail,)
        return NotImplemented
    def __hash__(self):
        return hash((self.delta,self.detail,))
    def __setattr__(self, name, value):
        if type(self) is _cls or name in _names:
            raise _frozen_error(name)
        super(_cls, self).__setattr__(name, value)
    def __delattr__(self, name):
        if type(self) is _cls or name in _names:
            raise _frozen_error(name)
        super(_cls, self).__delattr__(name)
    return (__init__, __repr__, __eq__, __hash__, __setattr__, __delattr__,)

def _12(_FACTORY, _fact_context, _frozen_error):  # darwin_memo.types.Task
    def __init__(self, prompt, context=_FACTORY):
        self.prompt = prompt
        self.context = _fact_context() if context is _FACTORY else context
    def __repr__(self):
        return f"{type(self).__qualname__}(prompt={self.prompt!r}, context={self.context!r})"
    def __eq__(self, other):
        if other.__class__ is self.__class__:
            return (self.prompt,self.context,) == (other.prompt,other.context,)
        return NotImplemented
    return (__init__, __repr__, __eq__,)

def _13(_FACTORY, _frozen_error):  # darwin_memo.types.Trajectory
    def __init__(self, cycle, task, answer, deciding_entry, supporting_entries, outcome):
        self.cycle = cycle
        self.task = task
        self.answer = answer
        self.deciding_entry = deciding_entry
        self.supporting_entries = supporting_entries
        self.outcome = outcome
    def __repr__(self):
        return f"{type(self).__qualname__}(cycle={self.cycle!r}, task={self.task!r}, answer={self.answer!r}, deciding_entry={self.deciding_entry!r}, supporting_entries={self.supporting_entries!r}, outcome={self.outcome!r})"
    def __eq__(self, other):
        if other.__class__ is self.__class__:
            return (self.cycle,self.task,self.answer,self.deciding_entry,self.supporting_entries,self.outcome,) == (other.cycle,other.task,other.answer,other.deciding_entry,other.supporting_entries,other.outcome,)
        return NotImplemented
    return (__init__, __repr__, __eq__,)


METHODS = {
    'def __init__(self, heir, members, clipped):\n    _object_setattr(self, \'heir\', heir)\n    _object_setattr(self, \'members\', members)\n    _object_setattr(self, \'clipped\', clipped)\ndef __repr__(self):\n    return f"{type(self).__qualname__}(heir={self.heir!r}, members={self.members!r}, clipped={self.clipped!r})"\ndef __eq__(self, other):\n    if other.__class__ is self.__class__:\n        return (self.heir,self.members,self.clipped,) == (other.heir,other.members,other.clipped,)\n    return NotImplemented\ndef __hash__(self):\n    return hash((self.heir,self.members,self.clipped,))\ndef __setattr__(self, name, value):\n    if type(self) is _cls or name in _names:\n        raise _frozen_error(name)\n    super(_cls, self).__setattr__(name, value)\ndef __delattr__(self, name):\n    if type(self) is _cls or name in _names:\n        raise _frozen_error(name)\n    super(_cls, self).__delattr__(name)\n# scope: _FACTORY _cls _frozen_error _names _object_setattr': _0,
    'def __init__(self, code, severity, summary, evidence, fix):\n    _object_setattr(self, \'code\', code)\n    _object_setattr(self, \'severity\', severity)\n    _object_setattr(self, \'summary\', summary)\n    _object_setattr(self, \'evidence\', evidence)\n    _object_setattr(self, \'fix\', fix)\ndef __repr__(self):\n    return f"{type(self).__qualname__}(code={self.code!r}, severity={self.severity!r}, summary={self.summary!r}, evidence={self.evidence!r}, fix={self.fix!r})"\ndef __eq__(self, other):\n    if other.__class__ is self.__class__:\n        return (self.code,self.severity,self.summary,self.evidence,self.fix,) == (other.code,other.severity,other.summary,other.evidence,other.fix,)\n    return NotImplemented\ndef __hash__(self):\n    return hash((self.code,self.severity,self.summary,self.evidence,self.fix,))\ndef __setattr__(self, name, value):\n    if type(self) is _cls or name in _names:\n        raise _frozen_error(name)\n    super(_cls, self).__setattr__(name, value)\ndef __delattr__(self, name):\n    if type(self) is _cls or name in _names:\n        raise _frozen_error(name)\n    super(_cls, self).__delattr__(name)\n# scope: _FACTORY _cls _frozen_error _names _object_setattr': _1,
    'def __init__(self, totals=_FACTORY):\n    self.totals = _fact_totals() if totals is _FACTORY else totals\ndef __repr__(self):\n    return f"{type(self).__qualname__}(totals={self.totals!r})"\ndef __eq__(self, other):\n    if other.__class__ is self.__class__:\n        return (self.totals,) == (other.totals,)\n    return NotImplemented\n# scope: _FACTORY _fact_totals _frozen_error': _2,
    'def __init__(self, events=_FACTORY, notes=_FACTORY, opened=_FACTORY, closed=_FACTORY, touched=_FACTORY, relaxed=_dflt_relaxed):\n    self.events = _fact_events() if events is _FACTORY else events\n    self.notes = _fact_notes() if notes is _FACTORY else notes\n    self.opened = _fact_opened() if opened is _FACTORY else opened\n    self.closed = _fact_closed() if closed is _FACTORY else closed\n    self.touched = _fact_touched() if touched is _FACTORY else touched\n    self.relaxed = relaxed\ndef __repr__(self):\n    return f"{type(self).__qualname__}(events={self.events!r}, notes={self.notes!r}, opened={self.opened!r}, closed={self.closed!r}, touched={self.touched!r}, relaxed={self.relaxed!r})"\ndef __eq__(self, other):\n    if other.__class__ is self.__class__:\n        return (self.events,self.notes,self.opened,self.closed,self.touched,self.relaxed,) == (other.events,other.notes,other.opened,other.closed,other.touched,other.relaxed,)\n    return NotImplemented\n# scope: _FACTORY _dflt_relaxed _fact_closed _fact_events _fact_notes _fact_opened _fact_touched _frozen_error': _3,
    'def __init__(self, query, answer, deciding_entry, supporting_entries, born_tick, id=_FACTORY):\n    self.query = query\n    self.answer = answer\n    self.deciding_entry = deciding_entry\n    self.supporting_entries = supporting_entries\n    self.born_tick = born_tick\n    self.id = _fact_id() if id is _FACTORY else id\ndef __repr__(self):\n    return f"{type(self).__qualname__}(query={self.query!r}, answer={self.answer!r}, deciding_entry={self.deciding_entry!r}, supporting_entries={self.supporting_entries!r}, born_tick={self.born_tick!r}, id={self.id!r})"\ndef __eq__(self, other):\n    if other.__class__ is self.__class__:\n        return (self.query,self.answer,self.deciding_entry,self.supporting_entries,self.born_tick,self.id,) == (other.query,other.answer,other.deciding_entry,other.supporting_entries,other.born_tick,other.id,)\n    return NotImplemented\n# scope: _FACTORY _fact_id _frozen_error': _4,
    'def __init__(self, text, deciding_entry=_dflt_deciding_entry, supporting_entries=_FACTORY, annotated_text=_dflt_annotated_text, refused=_dflt_refused, attribution=_dflt_attribution):\n    self.text = text\n    self.deciding_entry = deciding_entry\n    self.supporting_entries = _fact_supporting_entries() if supporting_entries is _FACTORY else supporting_entries\n    self.annotated_text = annotated_text\n    self.refused = refused\n    self.attribution = attribution\ndef __repr__(self):\n    return f"{type(self).__qualname__}(text={self.text!r}, deciding_entry={self.deciding_entry!r}, supporting_entries={self.supporting_entries!r}, annotated_text={self.annotated_text!r}, refused={self.refused!r}, attribution={self.attribution!r})"\ndef __eq__(self, other):\n    if other.__class__ is self.__class__:\n        return (self.text,self.deciding_entry,self.supporting_entries,self.annotated_text,self.refused,self.attribution,) == (other.text,other.deciding_entry,other.supporting_entries,other.annotated_text,other.refused,other.attribution,)\n    return NotImplemented\n# scope: _FACTORY _dflt_annotated_text _dflt_attribution _dflt_deciding_entry _dflt_refused _fact_supporting_entries _frozen_error': _5,
    'def __init__(self, where, index, message):\n    _object_setattr(self, \'where\', where)\n    _object_setattr(self, \'index\', index)\n    _object_setattr(self, \'message\', message)\ndef __repr__(self):\n    return f"{type(self).__qualname__}(where={self.where!r}, index={self.index!r}, message={self.message!r})"\ndef __eq__(self, other):\n    if other.__class__ is self.__class__:\n        return (self.where,self.index,self.message,) == (other.where,other.index,other.message,)\n    return NotImplemented\ndef __hash__(self):\n    return hash((self.where,self.index,self.message,))\ndef __setattr__(self, name, value):\n    if type(self) is _cls or name in _names:\n        raise _frozen_error(name)\n    super(_cls, self).__setattr__(name, value)\ndef __delattr__(self, name):\n    if type(self) is _cls or name in _names:\n        raise _frozen_error(name)\n    super(_cls, self).__delattr__(name)\n# scope: _FACTORY _cls _frozen_error _names _object_setattr': _6,
    'def __init__(self, cycles=_dflt_cycles, credit_gain=_dflt_credit_gain, supporting_share=_dflt_supporting_share, consolidate_every=_dflt_consolidate_every, merge_threshold=_dflt_merge_threshold, conflict_threshold=_dflt_conflict_threshold, write_experience=_dflt_write_experience, resource_scale=_dflt_resource_scale, admission_window=_dflt_admission_window, upkeep_requires_settlement=_dflt_upkeep_requires_settlement, merge_source_policy=_dflt_merge_source_policy, merge_similarity=_dflt_merge_similarity):\n    self.cycles = cycles\n    self.credit_gain = credit_gain\n    self.supporting_share = supporting_share\n    self.consolidate_every = consolidate_every\n    self.merge_threshold = merge_threshold\n    self.conflict_threshold = conflict_threshold\n    self.write_experience = write_experience\n    self.resource_scale = resource_scale\n    self.admission_window = admission_window\n    self.upkeep_requires_settlement = upkeep_requires_settlement\n    self.merge_source_policy = merge_source_policy\n    self.merge_similarity = merge_similarity\n    self.__post_init__()\ndef __repr__(self):\n    return f"{type(self).__qualname__}(cycles={self.cycles!r}, credit_gain={self.credit_gain!r}, supporting_share={self.supporting_share!r}, consolidate_every={self.consolidate_every!r}, merge_threshold={self.merge_threshold!r}, conflict_threshold={self.conflict_threshold!r}, write_experience={self.write_experience!r}, resource_scale={self.resource_scale!r}, admission_window={self.admission_window!r}, upkeep_requires_settlement={self.upkeep_requires_settlement!r}, merge_source_policy={self.merge_source_policy!r}, merge_similarity={self.merge_similarity!r})"\ndef __eq__(self, other):\n    if other.__class__ is self.__class__:\n        return (self.cycles,self.credit_gain,self.supporting_share,self.consolidate_every,self.merge_threshold,self.conflict_threshold,self.write_experience,self.resource_scale,self.admission_window,self.upkeep_requires_settlement,self.merge_source_policy,self.merge_similarity,) == (other.cycles,other.credit_gain,other.supporting_share,other.consolidate_every,other.merge_threshold,other.conflict_threshold,other.write_experience,other.resource_scale,other.admission_window,other.upkeep_requires_settlement,other.merge_source_policy,other.merge_similarity,)\n    return NotImplemented\n# scope: _FACTORY _dflt_admission_window _dflt_conflict_threshold _dflt_consolidate_every _dflt_credit_gain _dflt_cycles _dflt_merge_similarity _dflt_merge_source_policy _dflt_merge_threshold _dflt_resource_scale _dflt_supporting_share _dflt_upkeep_requires_settlement _dflt_write_experience _frozen_error': _7,
    'def __init__(self, stats=_FACTORY, trajectories=_FACTORY):\n    self.stats = _fact_stats() if stats is _FACTORY else stats\n    self.trajectories = _fact_trajectories() if trajectories is _FACTORY else trajectories\ndef __repr__(self):\n    return f"{type(self).__qualname__}(stats={self.stats!r}, trajectories={self.trajectories!r})"\ndef __eq__(self, other):\n    if other.__class__ is self.__class__:\n        return (self.stats,self.trajectories,) == (other.stats,other.trajectories,)\n    return NotImplemented\n# scope: _FACTORY _fact_stats _fact_trajectories _frozen_error': _8,
    'def __init__(self, cycle, population, births, deaths, merges, total_energy, resource_delta, tasks=_dflt_tasks, silent=_dflt_silent, nonzero_outcomes=_dflt_nonzero_outcomes):\n    self.cycle = cycle\n    self.population = population\n    self.births = births\n    self.deaths = deaths\n    self.merges = merges\n    self.total_energy = total_energy\n    self.resource_delta = resource_delta\n    self.tasks = tasks\n    self.silent = silent\n    self.nonzero_outcomes = nonzero_outcomes\ndef __repr__(self):\n    return f"{type(self).__qualname__}(cycle={self.cycle!r}, population={self.population!r}, births={self.births!r}, deaths={self.deaths!r}, merges={self.merges!r}, total_energy={self.total_energy!r}, resource_delta={self.resource_delta!r}, tasks={self.tasks!r}, silent={self.silent!r}, nonzero_outcomes={self.nonzero_outcomes!r})"\ndef __eq__(self, other):\n    if other.__class__ is self.__class__:\n        return (self.cycle,self.population,self.births,self.deaths,self.merges,self.total_energy,self.resource_delta,self.tasks,self.silent,self.nonzero_outcomes,) == (other.cycle,other.population,other.births,other.deaths,other.merges,other.total_energy,other.resource_delta,other.tasks,other.silent,other.nonzero_outcomes,)\n    return NotImplemented\n# scope: _FACTORY _dflt_nonzero_outcomes _dflt_silent _dflt_tasks _frozen_error': _9,
    'def __init__(self, question, answer, kind=_dflt_kind, sources=_FACTORY, energy=_dflt_energy, born_cycle=_dflt_born_cycle, recorded_ts=_FACTORY, last_used_cycle=_dflt_last_used_cycle, uses=_dflt_uses, lineage=_FACTORY, pinned=_dflt_pinned, probation=_dflt_probation, juvenile=_dflt_juvenile, imported_from=_dflt_imported_from, imported_at=_dflt_imported_at, id=_FACTORY, extra=_FACTORY):\n    self.question = question\n    self.answer = answer\n    self.kind = kind\n    self.sources = _fact_sources() if sources is _FACTORY else sources\n    self.energy = energy\n    self.born_cycle = born_cycle\n    self.recorded_ts = _fact_recorded_ts() if recorded_ts is _FACTORY else recorded_ts\n    self.last_used_cycle = last_used_cycle\n    self.uses = uses\n    self.lineage = _fact_lineage() if lineage is _FACTORY else lineage\n    self.pinned = pinned\n    self.probation = probation\n    self.juvenile = juvenile\n    self.imported_from = imported_from\n    self.imported_at = imported_at\n    self.id = _fact_id() if id is _FACTORY else id\n    self.extra = _fact_extra() if extra is _FACTORY else extra\ndef __repr__(self):\n    return f"{type(self).__qualname__}(question={self.question!r}, answer={self.answer!r}, kind={self.kind!r}, sources={self.sources!r}, energy={self.energy!r}, born_cycle={self.born_cycle!r}, recorded_ts={self.recorded_ts!r}, last_used_cycle={self.last_used_cycle!r}, uses={self.uses!r}, lineage={self.lineage!r}, pinned={self.pinned!r}, probation={self.probation!r}, juvenile={self.juvenile!r}, imported_from={self.imported_from!r}, imported_at={self.imported_at!r}, id={self.id!r})"\ndef __eq__(self, other):\n    if other.__class__ is self.__class__:\n        return (self.question,self.answer,self.kind,self.sources,self.energy,self.born_cycle,self.recorded_ts,self.last_used_cycle,self.uses,self.lineage,self.pinned,self.probation,self.juvenile,self.imported_from,self.imported_at,self.id,) == (other.question,other.answer,other.kind,other.sources,other.energy,other.born_cycle,other.recorded_ts,other.last_used_cycle,other.uses,other.lineage,other.pinned,other.probation,other.juvenile,other.imported_from,other.imported_at,other.id,)\n    return NotImplemented\n# scope: _FACTORY _dflt_born_cycle _dflt_energy _dflt_imported_at _dflt_imported_from _dflt_juvenile _dflt_kind _dflt_last_used_cycle _dflt_pinned _dflt_probation _dflt_uses _fact_extra _fact_id _fact_lineage _fact_recorded_ts _fact_sources _frozen_error': _10,
    'def __init__(self, delta, detail=_dflt_detail):\n    _object_setattr(self, \'delta\', delta)\n    _object_setattr(self, \'detail\', detail)\ndef __repr__(self):\n    return f"{type(self).__qualname__}(delta={self.delta!r}, detail={self.detail!r})"\ndef __eq__(self, other):\n    if other.__class__ is self.__class__:\n        return (self.delta,self.detail,) == (other.delta,other.detail,)\n    return NotImplemented\ndef __hash__(self):\n    return hash((self.delta,self.detail,))\ndef __setattr__(self, name, value):\n    if type(self) is _cls or name in _names:\n        raise _frozen_error(name)\n    super(_cls, self).__setattr__(name, value)\ndef __delattr__(self, name):\n    if type(self) is _cls or name in _names:\n        raise _frozen_error(name)\n    super(_cls, self).__delattr__(name)\n# scope: _FACTORY _cls _dflt_detail _frozen_error _names _object_setattr': _11,
    'def __init__(self, prompt, context=_FACTORY):\n    self.prompt = prompt\n    self.context = _fact_context() if context is _FACTORY else context\ndef __repr__(self):\n    return f"{type(self).__qualname__}(prompt={self.prompt!r}, context={self.context!r})"\ndef __eq__(self, other):\n    if other.__class__ is self.__class__:\n        return (self.prompt,self.context,) == (other.prompt,other.context,)\n    return NotImplemented\n# scope: _FACTORY _fact_context _frozen_error': _12,
    'def __init__(self, cycle, task, answer, deciding_entry, supporting_entries, outcome):\n    self.cycle = cycle\n    self.task = task\n    self.answer = answer\n    self.deciding_entry = deciding_entry\n    self.supporting_entries = supporting_entries\n    self.outcome = outcome\ndef __repr__(self):\n    return f"{type(self).__qualname__}(cycle={self.cycle!r}, task={self.task!r}, answer={self.answer!r}, deciding_entry={self.deciding_entry!r}, supporting_entries={self.supporting_entries!r}, outcome={self.outcome!r})"\ndef __eq__(self, other):\n    if other.__class__ is self.__class__:\n        return (self.cycle,self.task,self.answer,self.deciding_entry,self.supporting_entries,self.outcome,) == (other.cycle,other.task,other.answer,other.deciding_entry,other.supporting_entries,other.outcome,)\n    return NotImplemented\n# scope: _FACTORY _frozen_error': _13,
}
