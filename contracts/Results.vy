# pragma version ~=0.4.3
# SPDX-License-Identifier: AGPL-3.0-only
"""
@title veritrain results: BLS-certified round results, challenge window, fallback
@custom:contract-name results
@license GNU Affero General Public License v3.0 only
@notice A round's result (consensus, pay, reputation and cumulative earnings of
        every account, the held-out loss, the next model) is computed off-chain by
        a pure function of chain data and committed to by a 14-word header whose
        hash, the result root, validators sign with BLS. Anyone posts the aggregate
        signature once the round's audits closed and its reports resolved; it must
        verify against the round's cached aggregate key minus the non-signers, who
        hold less than 1/3 of the permitted stake. During the challenge window the
        challenge contracts recompute any one value from chain data; a wrong value
        rejects the root and makes its signers slashable (`slash_signer`, one call
        each). Another root may be posted until the result deadline; a root that
        survives its window becomes final, pays the round through the rewards
        contract and opens the next round. Without a final root by the deadline the
        round takes the fallback: nothing minted, the model unchanged. No function
        here loops over miners.
"""

from . import bls
from . import constants
from .interfaces import IRewards
from .interfaces import IRounds
from .interfaces import IStaking

MAX_VALIDATORS: constant(uint256) = constants.MAX_VALIDATORS
HEADER_WORDS: constant(uint256) = constants.HEADER_WORDS
G1_BYTES: constant(uint256) = constants.BLS_G1_BYTES
G2_BYTES: constant(uint256) = constants.BLS_G2_BYTES
BPS: constant(uint256) = constants.BPS
MASK16: constant(uint256) = 2**16 - 1
MASK32: constant(uint256) = 2**32 - 1
MASK48: constant(uint256) = 2**48 - 1
MASK96: constant(uint256) = 2**96 - 1
KEY_SHIFT: constant(uint256) = constants.MEMBER_KEY_SHIFT  # a member record's key hash (BlsKeys.member_at)
# header word positions (see `result_root_of`)

rounds: public(immutable(IRounds))
rewards: public(immutable(IRewards))
staking: public(immutable(IStaking))
run_config_hash: public(immutable(bytes32))
result_duration: public(immutable(uint256))
challenge_window: public(immutable(uint256))
signer_slash_bps: public(immutable(uint256))
challenger_share_bps: public(immutable(uint256))
deployer: immutable(address)
# the rewards contract's per-round cap, read once (a post then calls one contract less)
emission_per_round: immutable(uint256)

# the three contracts that recompute a posted value from chain data (split by concept, for EIP-170)
column_challenges: public(address)
tree_challenges: public(address)
account_challenges: public(address)
claims_challenges: public(address)
# the one pending attempt (a round opens only when the one before ended): the top 208 bits
# of keccak(abi_encode(result_root, non_signers_hash, posted_time, attempt)), the round's
# latest attempt number in bits 32-47 and its round + 1 in the low 32 bits; no commitment
# bits: nothing pending. Never zero, so a post rewrites a slot instead of filling a new one.
pending_word: uint256
rejected_count: public(HashMap[uint256, uint256])
# per rejected attempt: the pending commitment it had, and who challenged it
rejected_commit: public(HashMap[uint256, HashMap[uint256, bytes32]])
rejected_by: public(HashMap[uint256, HashMap[uint256, address]])
signer_slashed: public(HashMap[uint256, HashMap[address, bool]])
final_root: public(HashMap[uint256, bytes32])
heldout_loss: public(HashMap[uint256, uint256])
fallback: public(HashMap[uint256, bool])


event ResultPosted:
    round: indexed(uint256)
    attempt: uint256
    result_root: bytes32
    header: bytes32[HEADER_WORDS]
    non_signers: DynArray[address, MAX_VALIDATORS]
    posted_time: uint256
    poster: indexed(address)

event ResultRejected:
    round: indexed(uint256)
    attempt: uint256
    challenger: indexed(address)

event ResultFinal:
    round: indexed(uint256)
    result_root: bytes32
    model_hash: bytes32
    minted: uint256
    heldout_loss: uint256
    aggregation_root: bytes32

event RoundFellBack:
    round: indexed(uint256)

event SignerSlashed:
    round: indexed(uint256)
    attempt: uint256
    validator: indexed(address)
    amount: uint256

event Wired:
    column_challenges: address
    tree_challenges: address
    account_challenges: address
    claims_challenges: address


@deploy
def __init__(
    rounds_: IRounds, rewards_: IRewards, staking_: IStaking,
    result_duration_: uint256, challenge_window_: uint256, signer_slash_bps_: uint256, challenger_share_bps_: uint256,
):
    """
    @notice Fixes the result timing and the signers' slash.
    @param rounds_ The round clock (phases, validator snapshots, model hashes).
    @param rewards_ Pays a final result.
    @param staking_ Slashes the signers of a rejected result.
    @param result_duration_ Seconds after the audit deadline during which a result may be posted.
    @param challenge_window_ Seconds a posted result may be challenged.
    @param signer_slash_bps_ Share of a signer's stake slashed per rejected result it signed.
    @param challenger_share_bps_ The challenger's share of each such slash.
    """
    assert result_duration_ > 0 and challenge_window_ > 0, "results: zero duration"
    assert signer_slash_bps_ <= BPS and challenger_share_bps_ <= BPS, "results: bad fraction"
    rounds = rounds_
    rewards = rewards_
    staking = staking_
    run_config_hash = staticcall rounds_.run_config_hash()
    emission_per_round = staticcall rewards_.emission_per_round()
    result_duration = result_duration_
    challenge_window = challenge_window_
    signer_slash_bps = signer_slash_bps_
    challenger_share_bps = challenger_share_bps_
    deployer = msg.sender
    self.pending_word = MASK32  # nothing pending, and the slot already holds a value


@external
def wire(column_challenges_: address, tree_challenges_: address, account_challenges_: address, claims_challenges_: address):
    """
    @notice Names the four challenge contracts, once, by the deployer.
    @param column_challenges_ May `reject` (a column's values).
    @param tree_challenges_ May `reject` (the tree's shape, sum-tree nodes, unanswered demands).
    @param account_challenges_ May `reject` (the header, histories, validator entries).
    @param claims_challenges_ May `reject` (the claims root, a claims chunk, a claim).
    """
    assert msg.sender == deployer, "results: only deployer"
    assert self.column_challenges == empty(address), "results: already wired"
    assert (column_challenges_ != empty(address) and tree_challenges_ != empty(address)
            and account_challenges_ != empty(address) and claims_challenges_ != empty(address)), "results: zero address"
    self.column_challenges = column_challenges_
    self.tree_challenges = tree_challenges_
    self.account_challenges = account_challenges_
    self.claims_challenges = claims_challenges_
    log Wired(
        column_challenges=column_challenges_, tree_challenges=tree_challenges_, account_challenges=account_challenges_,
        claims_challenges=claims_challenges_,
    )


@external
def post_result(
    header: bytes32[HEADER_WORDS], signature: Bytes[G2_BYTES], non_signers: DynArray[address, MAX_VALIDATORS],
    non_signer_keys: DynArray[Bytes[G1_BYTES], MAX_VALIDATORS],
):
    """
    @notice Posts a round's result: its header and the aggregate BLS signature of
            its root by every permitted validator of the round except `non_signers`.
            When the keyed validators that revealed hold at least 2/3 of the permitted
            stake, the signers among them must hold more than 2/3 of their stake; else
            the signers more than 2/3 of the permitted stake. Allowed once the
            round's audits closed and its reports resolved, before its result
            deadline, while no other root of the round is pending.
    @param header The 15 header words (`result_root_of` names them).
    @param signature The aggregate signature (EIP-2537 G2 encoding) of the result root.
    @param non_signers Permitted validators of the round that did not sign, ascending.
    @param non_signer_keys Their registered BLS keys (empty for one whose key the round's aggregate lacks).
    """
    round: uint256 = convert(header[constants.H_ROUND], uint256)
    self._check_header(header, round)
    audit_deadline: uint256 = 0
    open_reports: uint256 = 0
    audit_deadline, open_reports = self._result_gate(round)
    assert open_reports == 0, "results: report open"
    assert block.timestamp < audit_deadline + result_duration, "results: result deadline passed"
    attempt: uint256 = self._next_attempt(round)
    assert len(non_signers) == len(non_signer_keys), "results: one key per non-signer"
    # the keys are taken out here, one at a time: passing the whole list to a helper would
    # copy 10 kB of memory
    records: DynArray[uint256, MAX_VALIDATORS] = []
    key: Bytes[G1_BYTES] = b""
    records, key = self._non_signer_records(round, non_signers)
    removed: Bytes[G1_BYTES] = b""
    for i: uint256 in range(len(non_signers), bound=MAX_VALIDATORS):
        removed = self._take_out(removed, records[i], non_signer_keys[i])
    if len(removed) > 0:
        key = bls._g1_add(key, bls._g1_neg(removed))
    assert not bls._is_infinity(key), "results: no signing key"
    root: bytes32 = keccak256(abi_encode(header))
    assert bls._verify(key, concat(root, b""), signature, bls.DST_SIG), "results: invalid aggregate signature"
    commit: bytes32 = self._commitment(root, keccak256(abi_encode(non_signers)), block.timestamp, attempt)
    self.pending_word = convert(commit, uint256) | (attempt << 32) | (round + 1)
    log ResultPosted(round=round, attempt=attempt, result_root=root, header=header, non_signers=non_signers, posted_time=block.timestamp, poster=msg.sender)


@external
def finalize_result(header: bytes32[HEADER_WORDS], non_signers_hash: bytes32, posted_time: uint256, attempt: uint256):
    """
    @notice Makes the pending result final once its challenge window passed
            unchallenged: pays the round and opens the next one on its model.
    @param header The pending result's header.
    @param non_signers_hash keccak256(abi_encode(non_signers)) of its post.
    @param posted_time When it was posted.
    @param attempt Its attempt number.
    """
    round: uint256 = convert(header[constants.H_ROUND], uint256)
    root: bytes32 = keccak256(abi_encode(header))
    assert self._pending(round) == self._commitment(root, non_signers_hash, posted_time, attempt), "results: not the pending result"
    assert block.timestamp >= posted_time + challenge_window, "results: challenge window open"
    self.pending_word = (attempt << 32) | (round + 1)
    self.final_root[round] = root
    loss: uint256 = convert(header[constants.H_LOSS], uint256)
    self.heldout_loss[round] = loss
    minted: uint256 = convert(header[constants.H_MINTED], uint256)
    extcall rewards.pay_round(round, minted, header[constants.H_CLAIMS_ROOT])
    log ResultFinal(round=round, result_root=root, model_hash=header[constants.H_MODEL], minted=minted, heldout_loss=loss,
                    aggregation_root=header[constants.H_AGGREGATION])
    extcall rounds.end_round(round, header[constants.H_MODEL], False)


@external
def fall_back(round: uint256):
    """
    @notice Ends `round` without a result once its result deadline passed with no
            result final or pending: nothing is minted and the next round opens on
            the same model, so the chain never halts. Anyone may call it.
    @param round The round.
    """
    audit_deadline: uint256 = self._result_gate(round)[0]
    assert block.timestamp >= audit_deadline + result_duration, "results: result deadline not reached"
    assert self._pending(round) == empty(bytes32), "results: a result is pending"
    self.fallback[round] = True
    log RoundFellBack(round=round)
    extcall rounds.end_round(round, staticcall rounds.model_hash(round), True)


@external
def reject(round: uint256, challenger: address):
    """
    @notice Rejects the pending result of `round`; its signers become slashable.
    @dev Only a challenge contract may call this, after a challenge showed a
         wrong value (it checked the pending commitment and the window).
    @param round The round.
    @param challenger Who showed it; receives a share of every signer slash.
    """
    assert (msg.sender == self.column_challenges or msg.sender == self.tree_challenges
            or msg.sender == self.account_challenges or msg.sender == self.claims_challenges), "results: only challenges"
    commit: bytes32 = self._pending(round)
    assert commit != empty(bytes32), "results: no pending result"
    attempt: uint256 = (self.pending_word >> 32) & MASK16
    self.rejected_count[round] = attempt
    self.rejected_commit[round][attempt] = commit
    self.rejected_by[round][attempt] = challenger
    self.pending_word = (attempt << 32) | (round + 1)
    log ResultRejected(round=round, attempt=attempt, challenger=challenger)


@external
def slash_signer(round: uint256, attempt: uint256, root: bytes32, non_signers: DynArray[address, MAX_VALIDATORS], posted_time: uint256, validator: address) -> uint256:
    """
    @notice Slashes one signer of a rejected result (once per round per validator):
            a validator whose key the round's aggregate holds, not among its
            non-signers. Anyone may call it.
    @param round The round.
    @param attempt The rejected attempt.
    @param root Its result root.
    @param non_signers Its non-signers, as posted.
    @param posted_time When it was posted.
    @param validator The signer to slash.
    @return The amount slashed.
    """
    commit: bytes32 = self._commitment(root, keccak256(abi_encode(non_signers)), posted_time, attempt)
    assert self.rejected_commit[round][attempt] == commit, "results: not a rejected result"
    # a signer is a validator whose key the round's aggregate holds, not among the non-signers:
    # a permitted validator without a key cannot have signed, listed or not
    assert staticcall rounds.member_record(round, validator) >> KEY_SHIFT != 0, "results: not a keyed validator of the round"
    assert validator not in non_signers, "results: did not sign"
    assert not self.signer_slashed[round][validator], "results: already slashed"
    self.signer_slashed[round][validator] = True
    amount: uint256 = extcall staking.slash(validator, signer_slash_bps, self.rejected_by[round][attempt], challenger_share_bps)
    log SignerSlashed(round=round, attempt=attempt, validator=validator, amount=amount)
    return amount


@view
@external
def pending(round: uint256) -> bytes32:
    """
    @notice The commitment of `round`'s pending attempt, zero when none: the top 208
            bits of keccak256(abi_encode(result_root, non_signers_hash, posted_time,
            attempt)), the low 32 zero (`commitment_of`).
    @param round The round.
    @return The commitment.
    """
    return self._pending(round)


@pure
@external
def commitment_of(root: bytes32, non_signers_hash: bytes32, posted_time: uint256, attempt: uint256) -> bytes32:
    """
    @notice What `pending` shows for an attempt.
    @param root Its result root.
    @param non_signers_hash keccak256(abi_encode(non_signers)).
    @param posted_time When it was posted.
    @param attempt Its attempt number.
    @return The commitment.
    """
    return self._commitment(root, non_signers_hash, posted_time, attempt)


@view
@external
def result_deadline(round: uint256) -> uint256:
    """
    @notice Until when a result of `round` may be posted (0 before its commit phase closed).
    @param round The round.
    @return The deadline timestamp.
    """
    audit_deadline: uint256 = (staticcall rounds.result_gate(round))[2]
    if audit_deadline == 0:
        return 0
    return audit_deadline + result_duration


@view
@external
def result_root_of(header: bytes32[HEADER_WORDS]) -> bytes32:
    """
    @notice The root validators sign: keccak(abi_encode(header)). The header words
            are: domain, chain id, this contract, run config hash, round, next
            model hash, column tree root, validator entries hash, claims root,
            claims list hash, columns, minted, held-out loss (1e6 = 1.0), quorum.
    @param header The header words.
    @return The result root.
    """
    return keccak256(abi_encode(header))


@view
@internal
def _check_header(header: bytes32[HEADER_WORDS], round: uint256):
    """
    @dev The words that bind a signature to this run, chain, contract and round, and
         the two any reader can check without chain data.
    """
    assert header[constants.H_TAG] == constants.RESULT_TAG, "results: wrong domain"
    assert convert(header[constants.H_CHAIN_ID], uint256) == chain.id, "results: wrong chain"
    assert convert(header[constants.H_RESULTS], uint256) == convert(self, uint256), "results: wrong contract"
    assert header[constants.H_RUN_CONFIG] == run_config_hash, "results: wrong run"
    assert header[constants.H_MODEL] != empty(bytes32), "results: empty model hash"
    assert convert(header[constants.H_QUORUM], uint256) <= 1, "results: bad quorum flag"
    assert convert(header[constants.H_MINTED], uint256) <= emission_per_round, "results: payout above the emission"


@view
@internal
def _result_gate(round: uint256) -> (uint256, uint256):
    """
    @dev (audit deadline, open reports) of `round`, after checking that it has not
         ended and its audit phase closed: what a post and a fallback both need.
    """
    ended: bool = False
    audit_closed: bool = False
    audit_deadline: uint256 = 0
    open_reports: uint256 = 0
    ended, audit_closed, audit_deadline, open_reports = staticcall rounds.result_gate(round)
    assert not ended, "results: round already ended"
    assert audit_closed, "results: audit phase open"
    return audit_deadline, open_reports


@view
@internal
def _next_attempt(round: uint256) -> uint256:
    """
    @dev The number a new attempt of `round` gets, once no other is pending.
    """
    word: uint256 = self.pending_word
    if word & MASK32 != round + 1:
        return 1
    assert word >> 48 == 0, "results: a result is pending"
    attempt: uint256 = ((word >> 32) & MASK16) + 1
    assert attempt <= MASK16, "results: too many attempts"
    return attempt


@view
@internal
def _non_signer_records(round: uint256, non_signers: DynArray[address, MAX_VALIDATORS]) -> (DynArray[uint256, MAX_VALIDATORS], Bytes[G1_BYTES]):
    """
    @dev The non-signers' records (weight, position, key hash) and the round's aggregate
         key, in one call (`Rounds.signing_facts`, which refuses non-signers that are not
         distinct permitted validators), after checking that the signers hold more than
         2/3 of the weight that call measures them against.
    """
    records: DynArray[uint256, MAX_VALIDATORS] = []
    packed: bytes32[3] = empty(bytes32[3])
    signers: uint256 = 0
    base: uint256 = 0
    records, packed, signers, base = staticcall rounds.signing_facts(round, non_signers)
    assert signers * 3 > base * 2, "results: signers hold 2/3 of the stake or less"
    xy: Bytes[96] = concat(packed[0], packed[1], packed[2])
    return records, concat(empty(bytes16), slice(xy, 0, 48), empty(bytes16), slice(xy, 48, 48))


@view
@internal
def _take_out(removed: Bytes[G1_BYTES], record: uint256, key: Bytes[G1_BYTES]) -> Bytes[G1_BYTES]:
    """
    @dev `removed` plus a non-signer's key when the round's aggregate holds it (the
         key's hash checked against its record); a keyless non-signer comes with none.
    """
    if record >> KEY_SHIFT == 0:
        assert len(key) == 0, "results: key outside the round's aggregate"
        return removed
    assert convert(keccak256(key), uint256) >> constants.MEMBER_KEY_DROP == record >> KEY_SHIFT, "results: wrong non-signer key"
    if len(removed) == 0:
        return key
    return bls._g1_add(removed, key)


@view
@internal
def _pending(round: uint256) -> bytes32:
    """
    @dev The pending commitment of `round` (its top 208 bits), or zero.
    """
    word: uint256 = self.pending_word
    if word & MASK32 != round + 1:
        return empty(bytes32)
    return convert(word & ~MASK48, bytes32)


@pure
@internal
def _commitment(root: bytes32, non_signers_hash: bytes32, posted_time: uint256, attempt: uint256) -> bytes32:
    """
    @dev What a post commits to, cut to the 208 bits the pending word keeps.
    """
    digest: uint256 = convert(keccak256(abi_encode(root, non_signers_hash, posted_time, attempt)), uint256)
    return convert(digest & ~MASK48, bytes32)
