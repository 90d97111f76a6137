# pragma version ~=0.4.3
# SPDX-License-Identifier: AGPL-3.0-only
"""
@title veritrain rounds and settlement
@custom:contract-name settlement
@license GNU Affero General Public License v3.0 only
@notice One round: miners commit `keccak(update_hash, trace_root)`; the commit
        phase closes at its deadline or once every active miner committed, and the
        hash of the closing block seeds the validators' challenges. Validators
        commit then reveal uint16 scores; `finalize` takes the stake-weighted
        median per miner (Yuma-style, weights clipped at consensus), updates
        reputation, mints the round's emission into claimable balances, and
        validators holding a stake majority attest the next model, which opens
        the next round. Phases close early once every participant has acted.
"""

from ethereum.ercs import IERC20

interface IStaking:
    def is_eligible_miner(account: address) -> bool: view
    def eligible_miner_count() -> uint256: view
    def top_validators() -> (DynArray[address, MAX_VALIDATORS], DynArray[uint256, MAX_VALIDATORS]): view
    def unbonding_delay() -> uint256: view

interface IToken:
    def mint(owner: address, amount: uint256): nonpayable
    def burn(amount: uint256): nonpayable

MAX_VALIDATORS: constant(uint256) = 64
MAX_MINERS: constant(uint256) = 256
SCORE_WORDS: constant(uint256) = 16  # 16 uint16 scores packed per word, 256 miners
BPS: constant(uint256) = 10_000
ONE: constant(uint256) = 10**18
SCORE_DOMAIN: constant(bytes32) = keccak256("veritrain/scores/v1")
# packed per-round word read on every commit (one cold SLOAD): start time,
# commit count, active miners, closing block, closing time
START_BITS: constant(uint256) = 48
COUNT_SHIFT: constant(uint256) = 48
ACTIVE_SHIFT: constant(uint256) = 64
CLOSED_BLOCK_SHIFT: constant(uint256) = 80
CLOSED_TIME_SHIFT: constant(uint256) = 144
MASK16: constant(uint256) = 2**16 - 1
MASK48: constant(uint256) = 2**48 - 1
MASK64: constant(uint256) = 2**64 - 1

token: public(immutable(IERC20))
staking: public(immutable(IStaking))
run_config_hash: public(immutable(bytes32))
genesis_model_hash: public(immutable(bytes32))
commit_duration: public(immutable(uint256))
score_duration: public(immutable(uint256))
reveal_duration: public(immutable(uint256))
emission_per_round: public(immutable(uint256))
miner_share_bps: public(immutable(uint256))
deployer: immutable(address)

disputes: public(address)
started: public(bool)
current_round: public(uint256)
round_word: HashMap[uint256, uint256]
round_seed: public(HashMap[uint256, bytes32])
commit_slot: public(HashMap[uint256, HashMap[address, bytes32]])

round_validators: HashMap[uint256, DynArray[address, MAX_VALIDATORS]]
validator_weight: public(HashMap[uint256, HashMap[address, uint256]])
total_weight: public(HashMap[uint256, uint256])

score_commitment: public(HashMap[uint256, HashMap[address, bytes32]])
score_commit_count: public(HashMap[uint256, uint256])
score_closed_time: public(HashMap[uint256, uint256])
revealed: public(HashMap[uint256, HashMap[address, bool]])
revealed_validators: HashMap[uint256, DynArray[address, MAX_VALIDATORS]]
round_miners: HashMap[uint256, DynArray[address, MAX_MINERS]]
round_miners_hash: HashMap[uint256, bytes32]
packed_scores: HashMap[uint256, HashMap[address, DynArray[uint256, SCORE_WORDS]]]

finalized: public(HashMap[uint256, bool])
consensus: public(HashMap[uint256, HashMap[address, uint16]])
reputation: public(HashMap[address, uint16])
claimable: public(HashMap[address, uint256])
claimed: public(HashMap[address, uint256])
held: public(HashMap[uint256, HashMap[address, uint256]])
open_reports: public(HashMap[uint256, HashMap[address, uint256]])
forfeited: public(HashMap[uint256, HashMap[address, bool]])
total_minted: public(uint256)
total_burned: public(uint256)
total_claimable: public(uint256)
total_held: public(uint256)

model_hash: public(HashMap[uint256, bytes32])
heldout_loss: public(HashMap[uint256, uint256])
attested_by: public(HashMap[uint256, HashMap[address, bool]])
attest_weight: public(HashMap[uint256, HashMap[bytes32, uint256]])
attest_losses: HashMap[uint256, HashMap[bytes32, DynArray[uint256, MAX_VALIDATORS]]]


event RoundOpened:
    round: indexed(uint256)
    model_hash: bytes32
    start_time: uint256
    active_miners: uint256
    validators: DynArray[address, MAX_VALIDATORS]

event UpdateCommitted:
    round: indexed(uint256)
    miner: indexed(address)
    update_hash: bytes32
    trace_root: bytes32

event CommitClosed:
    round: indexed(uint256)
    block_number: uint256
    commits: uint256

event SeedStored:
    round: indexed(uint256)
    seed: bytes32

event ScoresCommitted:
    round: indexed(uint256)
    validator: indexed(address)
    commitment: bytes32

event ScoresRevealed:
    round: indexed(uint256)
    validator: indexed(address)
    miners: DynArray[address, MAX_MINERS]
    scores: DynArray[uint16, MAX_MINERS]

event MinerSettled:
    round: indexed(uint256)
    miner: indexed(address)
    consensus: uint16
    reward: uint256
    reputation: uint16
    held: bool

event ValidatorSettled:
    round: indexed(uint256)
    validator: indexed(address)
    agreement: uint256
    reward: uint256

event Finalized:
    round: indexed(uint256)
    minted: uint256
    miners: uint256
    validators: uint256

event ModelAttestation:
    round: indexed(uint256)
    validator: indexed(address)
    model_hash: bytes32
    heldout_loss: uint256

event ModelRecorded:
    round: indexed(uint256)
    model_hash: bytes32
    heldout_loss: uint256

event Claimed:
    account: indexed(address)
    amount: uint256

event RewardReleased:
    round: indexed(uint256)
    miner: indexed(address)
    amount: uint256

event RewardForfeited:
    round: indexed(uint256)
    miner: indexed(address)
    amount: uint256

event ReportFlag:
    round: indexed(uint256)
    miner: indexed(address)
    open_reports: uint256

event DisputesSet:
    disputes: address


@deploy
def __init__(
    token_: IERC20, staking_: IStaking, run_config_hash_: bytes32, genesis_model_hash_: bytes32,
    commit_duration_: uint256, score_duration_: uint256, reveal_duration_: uint256,
    emission_per_round_: uint256, miner_share_bps_: uint256,
):
    """
    @notice Fixes the run config: its hash (model, data, replay profile, training
            and compression parameters are hashed off-chain into it), the genesis
            model, phase durations and emission.
    """
    assert commit_duration_ > 0 and score_duration_ > 0 and reveal_duration_ > 0, "settlement: zero duration"
    assert miner_share_bps_ <= BPS, "settlement: bad miner share"
    assert genesis_model_hash_ != empty(bytes32), "settlement: empty genesis model"
    token = token_
    staking = staking_
    run_config_hash = run_config_hash_
    genesis_model_hash = genesis_model_hash_
    commit_duration = commit_duration_
    score_duration = score_duration_
    reveal_duration = reveal_duration_
    emission_per_round = emission_per_round_
    miner_share_bps = miner_share_bps_
    deployer = msg.sender


@external
def set_disputes(disputes_: address):
    """
    @notice Names the disputes contract, once, by the deployer.
    """
    assert msg.sender == deployer, "settlement: only deployer"
    assert self.disputes == empty(address), "settlement: disputes already set"
    assert disputes_ != empty(address), "settlement: zero address"
    self.disputes = disputes_
    log DisputesSet(disputes=disputes_)


@external
def start():
    """
    @notice Opens round 0 on the genesis model. Anyone may call it once at least
            one validator holds a permit and at least one miner is eligible.
    """
    assert not self.started, "settlement: already started"
    assert self.disputes != empty(address), "settlement: not wired"
    assert staticcall staking.eligible_miner_count() > 0, "settlement: no eligible miner"
    self.started = True
    self.model_hash[0] = genesis_model_hash
    self._open_round(0)


@external
def commit_update(round: uint256, update_hash: bytes32, trace_root: bytes32):
    """
    @notice Commits the caller's update for `round`: one slot
            `keccak(update_hash, trace_root)`, at most once per miner per round.
            `update_hash` is bound to the miner's address off-chain, so a copied
            commitment cannot be opened by the copier. At most 256 miners commit per
            round (a reveal lists them all); the phase closes early once
            min(active miners, 256) have committed, never when no miner was active
            at the round's opening (then its deadline closes it).
    """
    word: uint256 = self.round_word[round]
    start_time: uint256 = word & MASK48
    assert start_time != 0, "settlement: round not open"
    assert (word >> CLOSED_BLOCK_SHIFT) & MASK64 == 0, "settlement: commit phase closed"
    assert block.timestamp < start_time + commit_duration, "settlement: commit deadline passed"
    assert staticcall staking.is_eligible_miner(msg.sender), "settlement: not an eligible miner"
    assert self.commit_slot[round][msg.sender] == empty(bytes32), "settlement: already committed"
    count: uint256 = ((word >> COUNT_SHIFT) & MASK16) + 1
    assert count <= MAX_MINERS, "settlement: round is full"
    self.commit_slot[round][msg.sender] = keccak256(concat(update_hash, trace_root))
    word = (word & ~(MASK16 << COUNT_SHIFT)) | (count << COUNT_SHIFT)
    active: uint256 = (word >> ACTIVE_SHIFT) & MASK16
    if active != 0 and count >= min(active, MAX_MINERS):
        word = self._closed(word, round, count)
    self.round_word[round] = word
    log UpdateCommitted(round=round, miner=msg.sender, update_hash=update_hash, trace_root=trace_root)


@external
def close_commit(round: uint256):
    """
    @notice Closes the commit phase of `round` once its deadline has passed.
            Anyone may call it; validators do when nobody else has.
    """
    word: uint256 = self.round_word[round]
    assert word & MASK48 != 0, "settlement: round not open"
    assert (word >> CLOSED_BLOCK_SHIFT) & MASK64 == 0, "settlement: commit phase closed"
    assert block.timestamp >= (word & MASK48) + commit_duration, "settlement: commit deadline not reached"
    self.round_word[round] = self._closed(word, round, (word >> COUNT_SHIFT) & MASK16)


@external
def store_seed(round: uint256):
    """
    @notice Stores the hash of the block that closed the commit phase, which
            seeds the challenges. Must be sent in a later block. If that block has
            left the 256-block window, the closing block moves to this one (no
            miner can commit any more, so the new seed is as unpredictable).
    """
    assert self.round_seed[round] == empty(bytes32), "settlement: seed already stored"
    closed_block: uint256 = (self.round_word[round] >> CLOSED_BLOCK_SHIFT) & MASK64
    assert closed_block != 0, "settlement: commit phase open"
    assert block.number > closed_block, "settlement: seed block not sealed"
    self._store_seed(round, closed_block)


@external
def commit_scores(round: uint256, commitment: bytes32):
    """
    @notice Commits `keccak(abi_encode(domain, chain id, this, validator, round,
            miners, scores, salt))` during the scoring phase.
    """
    assert self.validator_weight[round][msg.sender] > 0, "settlement: not a permitted validator"
    assert self._commit_closed_time(round) != 0, "settlement: commit phase open"
    self._touch_seed(round)
    assert self.round_seed[round] != empty(bytes32), "settlement: seed not stored"
    assert not self._score_closed(round), "settlement: scoring phase closed"
    assert self.score_commitment[round][msg.sender] == empty(bytes32), "settlement: scores already committed"
    assert commitment != empty(bytes32), "settlement: empty commitment"
    self.score_commitment[round][msg.sender] = commitment
    self.score_commit_count[round] += 1
    if self.score_commit_count[round] == len(self.round_validators[round]):
        self.score_closed_time[round] = block.timestamp
    log ScoresCommitted(round=round, validator=msg.sender, commitment=commitment)


@external
def reveal_scores(round: uint256, miners: DynArray[address, MAX_MINERS], scores: DynArray[uint16, MAX_MINERS], salt: bytes32):
    """
    @notice Reveals the caller's committed scores. `miners` must be every miner
            that committed in `round`, in strictly ascending address order.
            Stores the round's seed first if it is due and nobody has.
    """
    self._touch_seed(round)
    assert self._score_closed(round), "settlement: scoring phase open"
    assert block.timestamp < self._reveal_deadline(round), "settlement: reveal deadline passed"
    commitment: bytes32 = self.score_commitment[round][msg.sender]
    assert commitment != empty(bytes32), "settlement: no score commitment"
    assert not self.revealed[round][msg.sender], "settlement: already revealed"
    assert len(miners) == len(scores), "settlement: length mismatch"
    assert keccak256(abi_encode(SCORE_DOMAIN, chain.id, self, msg.sender, round, miners, scores, salt)) == commitment, "settlement: reveal does not match commitment"
    self._check_miner_list(round, miners)
    self.packed_scores[round][msg.sender] = self._pack(scores)
    self.revealed[round][msg.sender] = True
    self.revealed_validators[round].append(msg.sender)
    log ScoresRevealed(round=round, validator=msg.sender, miners=miners, scores=scores)


@external
def finalize(round: uint256):
    """
    @notice Settles `round` once its reveal phase is over: consensus scores,
            reputation, emission into claimable (or held-back) balances.
            Stores the round's seed first if it is due and nobody has.
    """
    self._touch_seed(round)
    assert not self.finalized[round], "settlement: already finalized"
    assert self._reveal_closed(round), "settlement: reveal phase open"
    self.finalized[round] = True
    miners: DynArray[address, MAX_MINERS] = self.round_miners[round]
    vals: DynArray[address, MAX_VALIDATORS] = self.revealed_validators[round]
    cons: DynArray[uint16, MAX_MINERS] = self._consensus_all(round, miners, vals)
    minted: uint256 = 0
    if len(vals) > 0 and len(miners) > 0:
        minted = self._pay_miners(round, miners, cons)
        minted += self._pay_validators(round, miners, vals, cons)
    if minted > 0:
        extcall IToken(token.address).mint(self, minted)
        self.total_minted += minted
    log Finalized(round=round, minted=minted, miners=len(miners), validators=len(vals))


@external
def attest_model(round: uint256, model_hash_: bytes32, heldout_loss_: uint256):
    """
    @notice A validator of round-1 attests the aggregated model of `round` and its
            held-out loss (fixed point, 1e6 = 1.0). Once validators holding a stake
            majority agree on a hash it is recorded with the median of their
            losses, and `round` opens. Late attestations are recorded but change nothing.
    """
    assert round > 0, "settlement: round 0 uses the genesis model"
    prev: uint256 = round - 1
    assert self.finalized[prev], "settlement: previous round not finalized"
    w: uint256 = self.validator_weight[prev][msg.sender]
    assert w > 0, "settlement: not a permitted validator"
    assert not self.attested_by[round][msg.sender], "settlement: already attested"
    assert model_hash_ != empty(bytes32), "settlement: empty model hash"
    self.attested_by[round][msg.sender] = True
    self.attest_weight[round][model_hash_] += w
    self.attest_losses[round][model_hash_].append(heldout_loss_)
    log ModelAttestation(round=round, validator=msg.sender, model_hash=model_hash_, heldout_loss=heldout_loss_)
    if self.model_hash[round] == empty(bytes32) and self.attest_weight[round][model_hash_] * 2 > self.total_weight[prev]:
        self.model_hash[round] = model_hash_
        loss: uint256 = self._median(self.attest_losses[round][model_hash_])
        self.heldout_loss[round] = loss
        log ModelRecorded(round=round, model_hash=model_hash_, heldout_loss=loss)
        self._open_round(round)


@external
def claim() -> uint256:
    """
    @notice Pays out the caller's claimable rewards.
    @return The amount paid.
    """
    amount: uint256 = self.claimable[msg.sender]
    assert amount > 0, "settlement: nothing to claim"
    self.claimable[msg.sender] = 0
    self.total_claimable -= amount
    self.claimed[msg.sender] += amount
    assert extcall token.transfer(msg.sender, amount, default_return_value=True), "settlement: transfer failed"
    log Claimed(account=msg.sender, amount=amount)
    return amount


@external
def report_opened(round: uint256, miner: address):
    """
    @notice Marks a fraud report against `miner` in `round`: its reward is held back.
    @dev Only the disputes contract may call this.
    """
    assert msg.sender == self.disputes, "settlement: only disputes"
    self.open_reports[round][miner] += 1
    log ReportFlag(round=round, miner=miner, open_reports=self.open_reports[round][miner])


@external
def report_resolved(round: uint256, miner: address, confirmed: bool):
    """
    @notice Ends a report: the first confirmed one forfeits the miner's reward for
            `round` (burning it if `round` is already finalized; otherwise finalize
            never mints it); otherwise a held reward is released once no report is open.
    @dev Only the disputes contract may call this.
    """
    assert msg.sender == self.disputes, "settlement: only disputes"
    assert self.open_reports[round][miner] > 0, "settlement: no open report"
    self.open_reports[round][miner] -= 1
    log ReportFlag(round=round, miner=miner, open_reports=self.open_reports[round][miner])
    amount: uint256 = self.held[round][miner]
    if confirmed:
        if self.forfeited[round][miner]:
            return  # forfeited by an earlier confirmed report: nothing left to burn
        self.forfeited[round][miner] = True
        if self.finalized[round]:
            # the reward was held at finalize; before finalize, finalize logs the forfeit
            if amount > 0:
                self.held[round][miner] = 0
                self.total_held -= amount
                self.total_burned += amount
                extcall IToken(token.address).burn(amount)
            log RewardForfeited(round=round, miner=miner, amount=amount)
    elif self.open_reports[round][miner] == 0 and amount > 0 and not self.forfeited[round][miner]:
        self.held[round][miner] = 0
        self.total_held -= amount
        self.claimable[miner] += amount
        self.total_claimable += amount
        log RewardReleased(round=round, miner=miner, amount=amount)


@view
@external
def round_info(round: uint256) -> (uint256, uint256, uint256, uint256, uint256, bytes32):
    """
    @notice (start time, commits, active miners, commit-closing block, commit-closing time, seed) of `round`.
    """
    word: uint256 = self.round_word[round]
    return (
        word & MASK48, (word >> COUNT_SHIFT) & MASK16, (word >> ACTIVE_SHIFT) & MASK16,
        (word >> CLOSED_BLOCK_SHIFT) & MASK64, (word >> CLOSED_TIME_SHIFT) & MASK48, self.round_seed[round],
    )


@view
@external
def phase(round: uint256) -> uint8:
    """
    @notice 0 not open, 1 commit, 2 scoring, 3 reveal, 4 awaiting finalize, 5 finalized.
    """
    if self.finalized[round]:
        return 5
    word: uint256 = self.round_word[round]
    if word & MASK48 == 0:
        return 0
    if self._commit_closed_time(round) == 0:
        return 1
    if not self._score_closed(round):
        return 2
    if not self._reveal_closed(round):
        return 3
    return 4


@view
@external
def deadlines(round: uint256) -> (uint256, uint256, uint256):
    """
    @notice (commit, scoring, reveal) deadlines of `round` as timestamps; the later
            two are 0 until the commit phase has closed.
    """
    start_time: uint256 = self.round_word[round] & MASK48
    if start_time == 0:
        return 0, 0, 0
    if self._commit_closed_time(round) == 0:
        return start_time + commit_duration, 0, 0
    return start_time + commit_duration, self._score_close_time(round), self._reveal_deadline(round)


@view
@external
def validators_of(round: uint256) -> DynArray[address, MAX_VALIDATORS]:
    """
    @notice The permitted validators of `round`, snapshotted when it opened.
    """
    return self.round_validators[round]


@view
@external
def revealed_validators_of(round: uint256) -> DynArray[address, MAX_VALIDATORS]:
    """
    @notice Validators that revealed scores in `round`, in reveal order.
    """
    return self.revealed_validators[round]


@view
@external
def miners_of(round: uint256) -> DynArray[address, MAX_MINERS]:
    """
    @notice Miners that committed in `round`, ascending (known after the first reveal).
    """
    return self.round_miners[round]


@view
@external
def scores_of(round: uint256, validator: address) -> DynArray[uint16, MAX_MINERS]:
    """
    @notice The scores `validator` revealed in `round`, in `miners_of(round)` order.
    """
    n: uint256 = len(self.round_miners[round])
    out: DynArray[uint16, MAX_MINERS] = []
    if not self.revealed[round][validator]:
        return out
    words: DynArray[uint256, SCORE_WORDS] = self.packed_scores[round][validator]
    for i: uint256 in range(n, bound=MAX_MINERS):
        out.append(self._unpack(words, i))
    return out


@view
@external
def has_committed(round: uint256, miner: address) -> bool:
    """
    @notice True when `miner` committed an update in `round`.
    """
    return self.commit_slot[round][miner] != empty(bytes32)


@view
@external
def reporting_open(round: uint256) -> bool:
    """
    @notice True while fraud reports for `round` may be filed: after the commit
            phase closed, before the reveal deadline and before finalize.
    """
    if self.finalized[round] or self._commit_closed_time(round) == 0:
        return False
    return block.timestamp < self._reveal_deadline(round)


@pure
@external
def weighted_median(scores: DynArray[uint16, MAX_VALIDATORS], weights: DynArray[uint256, MAX_VALIDATORS]) -> uint16:
    """
    @notice The consensus rule, exposed for audits: the largest score whose
            inclusive support is at least half of the total weight; 0 when the
            total weight is 0.
    """
    return self._weighted_median(scores, weights)


@view
@external
def score_commitment_hash(
    validator: address, round: uint256, miners: DynArray[address, MAX_MINERS],
    scores: DynArray[uint16, MAX_MINERS], salt: bytes32,
) -> bytes32:
    """
    @notice The commitment `commit_scores` expects, for clients to cross-check.
    """
    return keccak256(abi_encode(SCORE_DOMAIN, chain.id, self, validator, round, miners, scores, salt))


@internal
def _open_round(round: uint256):
    addrs: DynArray[address, MAX_VALIDATORS] = []
    stakes: DynArray[uint256, MAX_VALIDATORS] = []
    addrs, stakes = staticcall staking.top_validators()
    assert len(addrs) > 0, "settlement: no permitted validator"
    total: uint256 = 0
    for i: uint256 in range(len(addrs), bound=MAX_VALIDATORS):
        self.validator_weight[round][addrs[i]] = stakes[i]
        total += stakes[i]
    self.round_validators[round] = addrs
    self.total_weight[round] = total
    active: uint256 = min(staticcall staking.eligible_miner_count(), MASK16)
    self.round_word[round] = block.timestamp | (active << ACTIVE_SHIFT)
    self.current_round = round
    log RoundOpened(round=round, model_hash=self.model_hash[round], start_time=block.timestamp, active_miners=active, validators=addrs)


@internal
def _closed(word: uint256, round: uint256, count: uint256) -> uint256:
    log CommitClosed(round=round, block_number=block.number, commits=count)
    return word | (block.number << CLOSED_BLOCK_SHIFT) | (block.timestamp << CLOSED_TIME_SHIFT)


@internal
def _store_seed(round: uint256, closed_block: uint256):
    if block.number - closed_block > 256:
        # the closing block left the BLOCKHASH window: re-close here, store next block
        word: uint256 = self.round_word[round] & ~(MASK64 << CLOSED_BLOCK_SHIFT)
        self.round_word[round] = word | (block.number << CLOSED_BLOCK_SHIFT)
        log CommitClosed(round=round, block_number=block.number, commits=(word >> COUNT_SHIFT) & MASK16)
        return
    seed: bytes32 = blockhash(closed_block)
    self.round_seed[round] = seed
    log SeedStored(round=round, seed=seed)


@internal
def _touch_seed(round: uint256):
    if self.round_seed[round] != empty(bytes32):
        return
    closed_block: uint256 = (self.round_word[round] >> CLOSED_BLOCK_SHIFT) & MASK64
    if closed_block != 0 and block.number > closed_block and block.number - closed_block <= 256:
        self._store_seed(round, closed_block)


@view
@internal
def _commit_closed_time(round: uint256) -> uint256:
    return (self.round_word[round] >> CLOSED_TIME_SHIFT) & MASK48


@view
@internal
def _score_close_time(round: uint256) -> uint256:
    closed_early: uint256 = self.score_closed_time[round]
    if closed_early != 0:
        return closed_early
    # count from the commit deadline at the latest: a late `close_commit` must not
    # stretch the dispute timeline past the unbonding delay
    word: uint256 = self.round_word[round]
    return min((word >> CLOSED_TIME_SHIFT) & MASK48, (word & MASK48) + commit_duration) + score_duration


@view
@internal
def _score_closed(round: uint256) -> bool:
    if self._commit_closed_time(round) == 0:
        return False
    return self.score_closed_time[round] != 0 or block.timestamp >= self._score_close_time(round)


@view
@internal
def _reveal_deadline(round: uint256) -> uint256:
    return self._score_close_time(round) + reveal_duration


@view
@internal
def _reveal_closed(round: uint256) -> bool:
    if not self._score_closed(round):
        return False
    if block.timestamp >= self._reveal_deadline(round):
        return True
    return len(self.revealed_validators[round]) == self.score_commit_count[round]


@internal
def _check_miner_list(round: uint256, miners: DynArray[address, MAX_MINERS]):
    word: uint256 = self.round_word[round]
    assert len(miners) == (word >> COUNT_SHIFT) & MASK16, "settlement: miners must be every committed miner"
    list_hash: bytes32 = keccak256(abi_encode(miners))
    stored: bytes32 = self.round_miners_hash[round]
    if stored != empty(bytes32):
        assert list_hash == stored, "settlement: miners must be every committed miner"
        return
    previous: uint256 = 0
    for m: address in miners:
        assert convert(m, uint256) > previous, "settlement: miners not strictly ascending"
        previous = convert(m, uint256)
        assert self.commit_slot[round][m] != empty(bytes32), "settlement: miners must be every committed miner"
    self.round_miners[round] = miners
    self.round_miners_hash[round] = list_hash


@pure
@internal
def _pack(scores: DynArray[uint16, MAX_MINERS]) -> DynArray[uint256, SCORE_WORDS]:
    words: DynArray[uint256, SCORE_WORDS] = []
    n: uint256 = len(scores)
    for w: uint256 in range(SCORE_WORDS):
        if w * 16 >= n:
            break
        acc: uint256 = 0
        for j: uint256 in range(16):
            i: uint256 = w * 16 + j
            if i >= n:
                break
            acc = acc | (convert(scores[i], uint256) << (16 * j))
        words.append(acc)
    return words


@pure
@internal
def _unpack(words: DynArray[uint256, SCORE_WORDS], i: uint256) -> uint16:
    return convert((words[i // 16] >> (16 * (i % 16))) & MASK16, uint16)


@pure
@internal
def _weighted_median(scores: DynArray[uint16, MAX_VALIDATORS], weights: DynArray[uint256, MAX_VALIDATORS]) -> uint16:
    total: uint256 = 0
    for w: uint256 in weights:
        total += w
    if total == 0:
        return 0  # no weight: no score has support
    best: uint16 = 0
    for candidate: uint16 in scores:
        if candidate <= best:
            continue
        support: uint256 = 0
        for j: uint256 in range(len(scores), bound=MAX_VALIDATORS):
            if scores[j] >= candidate:
                support += weights[j]
        if support * 2 >= total:
            best = candidate
    return best


@view
@internal
def _consensus_all(
    round: uint256, miners: DynArray[address, MAX_MINERS], vals: DynArray[address, MAX_VALIDATORS]
) -> DynArray[uint16, MAX_MINERS]:
    weights: DynArray[uint256, MAX_VALIDATORS] = []
    words: DynArray[DynArray[uint256, SCORE_WORDS], MAX_VALIDATORS] = []
    for v: address in vals:
        weights.append(self.validator_weight[round][v])
        words.append(self.packed_scores[round][v])
    out: DynArray[uint16, MAX_MINERS] = []
    for i: uint256 in range(len(miners), bound=MAX_MINERS):
        column: DynArray[uint16, MAX_VALIDATORS] = []
        for j: uint256 in range(len(vals), bound=MAX_VALIDATORS):
            column.append(self._unpack(words[j], i))
        out.append(self._weighted_median(column, weights))
    return out


@internal
def _pay_miners(round: uint256, miners: DynArray[address, MAX_MINERS], cons: DynArray[uint16, MAX_MINERS]) -> uint256:
    pool: uint256 = emission_per_round * miner_share_bps // BPS
    total: uint256 = 0
    for c: uint16 in cons:
        total += convert(c, uint256)
    minted: uint256 = 0
    for i: uint256 in range(len(miners), bound=MAX_MINERS):
        m: address = miners[i]
        c: uint16 = cons[i]
        self.consensus[round][m] = c
        rep: uint16 = convert((9 * convert(self.reputation[m], uint256) + convert(c, uint256)) // 10, uint16)
        self.reputation[m] = rep
        reward: uint256 = 0
        if total > 0:
            reward = pool * convert(c, uint256) // total
        is_held: bool = False
        if self.forfeited[round][m]:
            log RewardForfeited(round=round, miner=m, amount=reward)
            reward = 0
        elif self.open_reports[round][m] > 0:
            self.held[round][m] = reward
            self.total_held += reward
            is_held = True
        else:
            self.claimable[m] += reward
            self.total_claimable += reward
        minted += reward
        log MinerSettled(round=round, miner=m, consensus=c, reward=reward, reputation=rep, held=is_held)
    return minted


@internal
def _pay_validators(
    round: uint256, miners: DynArray[address, MAX_MINERS], vals: DynArray[address, MAX_VALIDATORS],
    cons: DynArray[uint16, MAX_MINERS],
) -> uint256:
    pool: uint256 = emission_per_round - emission_per_round * miner_share_bps // BPS
    agreements: DynArray[uint256, MAX_VALIDATORS] = []
    shares: DynArray[uint256, MAX_VALIDATORS] = []
    total: uint256 = 0
    for v: address in vals:
        words: DynArray[uint256, SCORE_WORDS] = self.packed_scores[round][v]
        low: uint256 = 0
        high: uint256 = 0
        for i: uint256 in range(len(miners), bound=MAX_MINERS):
            s: uint256 = convert(self._unpack(words, i), uint256)
            c: uint256 = convert(cons[i], uint256)
            low += min(s, c)
            high += max(s, c)
        # agreement = sum(min)/sum(max): 1 when the validator matches consensus,
        # lower both for scores clipped above consensus and for scores below it
        agreement: uint256 = ONE
        if high > 0:
            agreement = low * ONE // high
        share: uint256 = self.validator_weight[round][v] * agreement
        agreements.append(agreement)
        shares.append(share)
        total += share
    minted: uint256 = 0
    for j: uint256 in range(len(vals), bound=MAX_VALIDATORS):
        reward: uint256 = 0
        if total > 0:
            reward = pool * shares[j] // total
        self.claimable[vals[j]] += reward
        self.total_claimable += reward
        minted += reward
        log ValidatorSettled(round=round, validator=vals[j], agreement=agreements[j], reward=reward)
    return minted


@pure
@internal
def _median(values: DynArray[uint256, MAX_VALIDATORS]) -> uint256:
    # insertion sort; lower median keeps the result one of the attested values
    xs: DynArray[uint256, MAX_VALIDATORS] = values
    n: uint256 = len(xs)
    for i: uint256 in range(1, MAX_VALIDATORS):
        if i >= n:
            break
        key: uint256 = xs[i]
        j: uint256 = i
        for _k: uint256 in range(MAX_VALIDATORS):
            if j == 0 or xs[j - 1] <= key:
                break
            xs[j] = xs[j - 1]
            j -= 1
        xs[j] = key
    return xs[(n - 1) // 2]
