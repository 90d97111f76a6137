# pragma version ~=0.4.3
"""
@title ERC-20 stand-in whose transfers can return false
@notice Test double: lets the suite reach the "transfer failed" reverts that
        snekmate's token never triggers (it reverts instead of returning false).
"""

balanceOf: public(HashMap[address, uint256])
totalSupply: public(uint256)
failing: public(bool)


@external
def set_failing(flag: bool):
    self.failing = flag


@external
def mint(owner: address, amount: uint256):
    self.balanceOf[owner] += amount
    self.totalSupply += amount


@external
def burn(amount: uint256):
    self.balanceOf[msg.sender] -= amount
    self.totalSupply -= amount


@external
def approve(spender: address, amount: uint256) -> bool:
    return True


@external
def transfer(to: address, amount: uint256) -> bool:
    if self.failing:
        return False
    self.balanceOf[msg.sender] -= amount
    self.balanceOf[to] += amount
    return True


@external
def transferFrom(owner: address, to: address, amount: uint256) -> bool:
    if self.failing:
        return False
    self.balanceOf[owner] -= amount
    self.balanceOf[to] += amount
    return True
